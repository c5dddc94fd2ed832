"""Receives messages with Qpid Proton and prints each as one JSON line.

usage: receive.py URL SOURCE --count N [--accept K] [--credit C]
The first K messages (all when K is absent) are accepted; the rest are left unsettled
when the link detaches. Prints {"ready": true} once the link is attached.
"""
import argparse
import base64
import json

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container


def args():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("source")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--accept", type=int)
    p.add_argument("--credit", type=int, default=10)
    return p.parse_args()


def say(**fields):
    print(json.dumps(fields, default=str), flush=True)


def body_of(m: Message):
    b = m.body
    if isinstance(b, (bytes, memoryview)):
        return {"data": bytes(b).decode("utf-8", "replace")}
    return {"value": b}


class Receive(MessagingHandler):
    def __init__(self, a):
        super().__init__(prefetch=a.credit, auto_accept=False)
        self.a = a
        self.got = 0

    def on_start(self, event):
        conn = event.container.connect(self.a.url, allowed_mechs="ANONYMOUS")
        event.container.create_receiver(conn, self.a.source)

    def on_link_opened(self, event):
        if event.receiver and event.receiver.remote_source.address:
            say(ready=True, address=event.receiver.remote_source.address)

    def on_message(self, event):
        m = event.message
        say(to=m.address, properties=m.properties, delivery_count=m.delivery_count, **body_of(m))
        self.got += 1
        if self.a.accept is None or self.got <= self.a.accept:
            self.accept(event.delivery)
        if self.got == self.a.count:
            event.receiver.close()
            event.connection.close()

    def on_link_error(self, event):
        c = event.link.remote_condition
        say(link_error=c.name, description=c.description)
        event.connection.close()


Container(Receive(args())).run()
