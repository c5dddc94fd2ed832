"""Sends messages with Qpid Proton and prints each outcome as one JSON line.

usage: send.py URL ADDRESS [--body TEXT] [--data TEXT | --size N] [--count N] [--prop K=V]...
               [--to SUBJECT] [--settled] [--user U --password P]
               [--ca FILE [--cert FILE --key FILE] [--mech EXTERNAL]]
ADDRESS "-" opens a link with a null target (the anonymous relay).
--size N: one data section of N bytes (too large for a command line).
With --ca the URL is amqps://; --cert/--key present a client certificate.
"""
import argparse
import json
import sys

from proton import Message, SSLDomain
from proton.handlers import MessagingHandler
from proton.reactor import AtMostOnce, Container


def args():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("address")
    p.add_argument("--body")
    p.add_argument("--data")
    p.add_argument("--size", type=int)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--prop", action="append", default=[])
    p.add_argument("--to")
    p.add_argument("--settled", action="store_true")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--ca")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--mech")
    return p.parse_args()


def say(**fields):
    print(json.dumps(fields), flush=True)


class Send(MessagingHandler):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.sent = 0
        self.settled = 0

    def on_start(self, event):
        kw = {"allowed_mechs": self.a.mech or ("PLAIN" if self.a.user else "ANONYMOUS")}
        if self.a.user:
            kw.update(user=self.a.user, password=self.a.password)
        if self.a.ca:
            ssl = SSLDomain(SSLDomain.MODE_CLIENT)
            ssl.set_trusted_ca_db(self.a.ca)
            ssl.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
            if self.a.cert:
                ssl.set_credentials(self.a.cert, self.a.key, None)
            kw.update(ssl_domain=ssl, sasl_enabled=True)
        conn = event.container.connect(self.a.url, **kw)
        target = None if self.a.address == "-" else self.a.address
        opts = [AtMostOnce()] if self.a.settled else []
        event.container.create_sender(conn, target, options=opts)

    def message(self, i):
        if self.a.size is not None:
            body = bytes(i % 251 for i in range(self.a.size))
        else:
            body = self.a.body if self.a.data is None else self.a.data.encode()
        props = dict(kv.split("=", 1) for kv in self.a.prop)
        # inferred: bytes go as a data section, not as an amqp-value of type binary.
        m = Message(body=body if self.a.count == 1 else f"{body}-{i}", properties=props or None, inferred=self.a.data is not None or self.a.size is not None)
        if self.a.to:
            m.address = self.a.to
        return m

    def on_sendable(self, event):
        while event.sender.credit and self.sent < self.a.count:
            event.sender.send(self.message(self.sent))
            self.sent += 1
            if self.a.settled:
                say(outcome="sent")
        if self.a.settled and self.sent == self.a.count:
            event.connection.close()

    def done(self, event, **outcome):
        say(**outcome)
        self.settled += 1
        if self.settled == self.a.count:
            event.connection.close()

    def on_accepted(self, event):
        self.done(event, outcome="accepted")

    def on_rejected(self, event):
        c = event.delivery.remote.condition
        self.done(event, outcome="rejected", condition=c.name if c else None, description=c.description if c else None)

    def on_released(self, event):
        self.done(event, outcome="released")

    def on_link_error(self, event):
        c = event.link.remote_condition
        say(link_error=c.name, description=c.description)
        event.connection.close()

    def on_transport_error(self, event):
        c = event.transport.condition
        say(transport_error=c.name if c else None, description=c.description if c else None)
        sys.exit(0)

    def on_connection_error(self, event):
        c = event.connection.remote_condition
        say(connection_error=c.name if c else None)


Container(Send(args())).run()
