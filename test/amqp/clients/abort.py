"""Streams a message's bytes on a delivery with Qpid Proton, aborts it, then sends one
more message; prints {"aborted": true} and the second message's outcome as JSON lines.

usage: abort.py URL ADDRESS
"""
import json, sys
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

def say(**f): print(json.dumps(f), flush=True)

class Abort(MessagingHandler):
    def __init__(self, url, address):
        super().__init__()
        self.url, self.address = url, address
        self.stage = 0
    def on_start(self, event):
        conn = event.container.connect(self.url, allowed_mechs="ANONYMOUS")
        self.sender = event.container.create_sender(conn, self.address)
    def on_sendable(self, event):
        if self.stage != 0: return
        self.stage = 1
        s = event.sender
        self.dlv = s.delivery("partial")
        # A whole message's bytes, sent without ending the delivery: only the abort says
        # it is not a message (rhea alone would publish it).
        data = Message(body=b"never published " * 1000, inferred=True).encode()
        s.stream(data)
        # Proton writes the streamed frames on its next pass; abort once they are out, so the
        # gateway sees transfers with more=true and then the abort.
        event.container.schedule(0.3, self)
    def on_timer_task(self, event):
        self.dlv.abort()
        say(aborted=True)
        self.sender.send(Message(body=b"after the abort", inferred=True))
    def on_accepted(self, event):
        say(outcome="accepted")
        event.connection.close()
    def on_rejected(self, event):
        say(outcome="rejected")
        event.connection.close()
    def on_transport_error(self, event):
        c = event.transport.condition
        say(transport_error=c.name if c else None)

Container(Abort(sys.argv[1], sys.argv[2])).run()
