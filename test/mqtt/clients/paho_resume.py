"""One connection of a session on Debian's paho-mqtt (1.6), as a row of the resume table
(docs/decisions/mqtt-sessions.md) has it, printing what happens as JSON lines.

usage: paho_resume.py PORT --id ID [--v311] --clean 0|1 [--expiry N] --sub FILTER --qos Q
                      --until PAYLOAD --end disconnect|drop|hold [--disconnect-expiry N]

--expiry / --disconnect-expiry left out: no Session Expiry Interval property at all (MQTT 5
3.1.2.11.2: 0 on CONNECT; 3.14.2.2.2: the CONNECT's on DISCONNECT).
Lines: {"connack": rc, "present": bool}, {"subscribed": true} (only when the session was
not present: a resumed one keeps its subscription), {"message": payload}, then, once
--until has arrived and no QoS 2 delivery waits for its PUBREL: --end disconnect sends DISCONNECT, drop closes the socket without
one (the process exits), hold waits for the server to end the connection
({"disconnect": reason code}); {"done": true}.
"""
import argparse
import os
import threading
import time

import paho.mqtt.client as mqtt
from jsonlines import emit
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


def args():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("--id", required=True)
    p.add_argument("--v311", action="store_true")
    p.add_argument("--clean", type=int, required=True)
    p.add_argument("--expiry", type=int)
    p.add_argument("--sub", required=True)
    p.add_argument("--qos", type=int, required=True)
    p.add_argument("--until", required=True)
    p.add_argument("--end", choices=["disconnect", "drop", "hold"], required=True)
    p.add_argument("--disconnect-expiry", type=int)
    p.add_argument("--seconds", type=float, default=20)
    return p.parse_args()


def say(**fields):
    emit(fields)


a = args()
v5 = not a.v311
if v5:
    client = mqtt.Client(client_id=a.id, protocol=mqtt.MQTTv5)
else:
    client = mqtt.Client(client_id=a.id, clean_session=a.clean == 1, protocol=mqtt.MQTTv311)
arrived = threading.Event()
ended = threading.Event()


def on_connect(c, userdata, flags, rc, properties=None):
    present = bool(flags.get("session present"))
    say(connack=rc.value if hasattr(rc, "value") else rc, present=present)
    if not present:
        c.subscribe(a.sub, qos=a.qos)


def on_subscribe(c, userdata, mid, granted, properties=None):
    say(subscribed=True)


def on_message(c, userdata, msg):
    payload = msg.payload.decode()
    say(message=payload)
    if payload == a.until:
        arrived.set()


def on_disconnect(c, userdata, rc, properties=None):
    say(disconnect=rc.value if hasattr(rc, "value") else rc)
    ended.set()


client.on_connect = on_connect
client.on_subscribe = on_subscribe
client.on_message = on_message
client.on_disconnect = on_disconnect


def run_until(done, seconds):
    """One thread, the network loop's: an acknowledgement paho queues after on_message is
    written before anything asked after it (with loop_start, a DISCONNECT from the main
    thread could overtake m3's PUBACK, and m3 would rightly come again)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        client.loop(0.05)
    return done()


if v5:
    props = None
    if a.expiry is not None:
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = a.expiry
    client.connect("127.0.0.1", a.port, 60, clean_start=a.clean == 1, properties=props)
else:
    client.connect("127.0.0.1", a.port, 60)
# --until has come, and no QoS 2 message waits for its PUBREL (paho hands those over only then).
if not run_until(lambda: arrived.is_set() and not client._in_messages, a.seconds):
    say(error="no " + a.until)
elif a.end == "drop":
    # Gone without DISCONNECT once what it owes is written: the socket closes with the process.
    run_until(lambda: not client._out_packet, 5)
    say(done=True)
    os._exit(0)
elif a.end == "disconnect":
    props = None
    if v5 and a.disconnect_expiry is not None:
        props = Properties(PacketTypes.DISCONNECT)
        props.SessionExpiryInterval = a.disconnect_expiry
    client.disconnect(properties=props) if v5 else client.disconnect()
    run_until(ended.is_set, 5)
else:
    run_until(ended.is_set, a.seconds)
say(done=True)
