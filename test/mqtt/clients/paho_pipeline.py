"""Debian's paho-mqtt (1.6) pipelining: SUBSCRIBE and a QoS 1 PUBLISH written right after
CONNECT, before the CONNACK is read (no network loop runs yet, so paho writes each packet
as it is queued), then the loop starts. Prints JSON lines.

usage: paho_pipeline.py PORT TOPIC [--v311] [--seconds S]
"""
import argparse
import threading

import paho.mqtt.client as mqtt
from jsonlines import emit

p = argparse.ArgumentParser()
p.add_argument("port", type=int)
p.add_argument("topic")
p.add_argument("--v311", action="store_true")
p.add_argument("--seconds", type=float, default=10)
a = p.parse_args()


def say(**fields):
    emit(fields)


client = mqtt.Client(client_id="", protocol=mqtt.MQTTv311 if a.v311 else mqtt.MQTTv5)
got = threading.Event()
connacked = threading.Event()


def code(rc):
    return rc.value if hasattr(rc, "value") else rc


client.on_connect = lambda c, u, flags, rc, properties=None: (connacked.set(), say(connack=code(rc)))
client.on_subscribe = lambda c, u, mid, granted, properties=None: say(suback=[code(g) for g in granted])
client.on_publish = lambda c, u, mid: say(puback=mid)


def on_message(c, u, msg):
    say(message=msg.payload.decode(), qos=msg.qos)
    got.set()


client.on_message = on_message
client.on_disconnect = lambda c, u, rc, properties=None: say(disconnect=code(rc))

if a.v311:
    client.connect("127.0.0.1", a.port, keepalive=30)
else:
    client.connect("127.0.0.1", a.port, keepalive=30, clean_start=True)
sub_rc, _ = client.subscribe(a.topic, qos=1)
info = client.publish(a.topic, "pipelined", qos=1)
# Nothing has read the socket yet: both went out before the CONNACK could be seen.
say(written_before_connack=not connacked.is_set() and sub_rc == 0 and info.rc == 0)
client.loop_start()
got.wait(a.seconds)
say(done=True)
client.loop_stop()
