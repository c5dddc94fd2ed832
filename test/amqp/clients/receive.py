"""Receives messages with Qpid Proton and prints each as one JSON line.

usage: receive.py URL SOURCE --count N [--accept K] [--credit C] [--durable NAME --container ID [--keep]] [--dynamic]
                  [--size-only] [--selector SQL] [--app-filter KEY=VALUE ...] [--subject-filter VALUE]
The first K messages (all when K is absent) are accepted; the rest are left unsettled
when the link detaches. Prints {"ready": true} once the link is attached.
--durable: a durable subscription (Proton's DurableSubscription) on link NAME of container
ID; --keep ends with a detach that keeps it (closed=false), else the close ends it.
--dynamic: a dynamic source (SOURCE is ignored); the ready line carries the address given.
--size-only: a data body is printed as its size and a digest, not its bytes.
--selector: a JMS selector (Proton's Selector, apache.org:selector-filter:string);
--app-filter / --subject-filter: filtex application-properties / properties filters.
The ready line lists the filters the gateway's attach echoes; a refused link prints
{"link_error": condition, "description": ...}.
"""
import argparse
import base64
import hashlib
import json

from proton import Described, Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container, DurableSubscription, Filter, Selector


def args():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("source")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--accept", type=int)
    p.add_argument("--credit", type=int, default=10)
    p.add_argument("--durable")
    p.add_argument("--container")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--dynamic", action="store_true")
    p.add_argument("--size-only", action="store_true")
    p.add_argument("--selector")
    p.add_argument("--app-filter", action="append", default=[])
    p.add_argument("--subject-filter")
    return p.parse_args()


def filter_options(a):
    """The link options that put the asked-for filters in the source's filter set."""
    if a.selector and not (a.app_filter or a.subject_filter):
        return [Selector(a.selector)]
    out = []
    entries = {}
    if a.selector:
        entries[symbol("jms-selector")] = Described(symbol("apache.org:selector-filter:string"), a.selector)
    if a.app_filter:
        props = dict(kv.split("=", 1) for kv in a.app_filter)
        entries[symbol("app")] = Described(symbol("amqp:application-properties-filter"), props)
    if a.subject_filter:
        entries[symbol("props")] = Described(symbol("amqp:properties-filter"), {symbol("subject"): a.subject_filter})
    if entries:
        out.append(Filter(entries))
    return out


def say(**fields):
    print(json.dumps(fields, default=str), flush=True)


def body_of(m: Message, size_only=False):
    b = m.body
    if isinstance(b, (bytes, memoryview)):
        if size_only:
            return {"size": len(bytes(b)), "sha256": hashlib.sha256(bytes(b)).hexdigest()}
        return {"data": bytes(b).decode("utf-8", "replace")}
    return {"value": b}


class Receive(MessagingHandler):
    def __init__(self, a):
        super().__init__(prefetch=a.credit, auto_accept=False)
        self.a = a
        self.got = 0

    def on_start(self, event):
        if self.a.container:
            event.container.container_id = self.a.container
        conn = event.container.connect(self.a.url, allowed_mechs="ANONYMOUS")
        if self.a.dynamic:
            event.container.create_receiver(conn, None, dynamic=True)
        elif self.a.durable:
            event.container.create_receiver(conn, self.a.source, name=self.a.durable, options=DurableSubscription())
        else:
            event.container.create_receiver(conn, self.a.source, options=filter_options(self.a))

    def on_link_opened(self, event):
        if event.receiver and event.receiver.remote_source.address:
            src = event.receiver.remote_source
            echoed = src.filter.get_object() if src.filter.next() else None
            say(ready=True, address=src.address, durable=src.durability, never_expires=src.expiry_policy == src.EXPIRE_NEVER,
                filters=sorted(str(k) for k in (echoed or {}).keys()))

    def on_message(self, event):
        m = event.message
        say(to=m.address, properties=m.properties, delivery_count=m.delivery_count,
            correlation_id=m.correlation_id, **body_of(m, self.a.size_only))
        self.got += 1
        if self.a.accept is None or self.got <= self.a.accept:
            self.accept(event.delivery)
        if self.got == self.a.count:
            if self.a.keep:
                event.receiver.detach()
            else:
                event.receiver.close()
            event.connection.close()

    def on_link_error(self, event):
        c = event.link.remote_condition
        say(link_error=c.name, description=c.description)
        event.connection.close()


Container(Receive(args())).run()
