"""An MQTT client on Debian's paho-mqtt (1.6), printing what happens as JSON lines.

usage: paho_client.py PORT [--v311] [--id ID] [--topic-alias-max N] [--max-packet N]
                      [--auth-method M] [--sub FILTER]... [--sub-id N]... [--qos Q]
                      [--pub TOPIC] [--prop K=V]... [--count N] [--payload TEXT]
                      [--hold-pubrel] [--release-then N | --more N] [--expect N] [--seconds S]

Lines: {"connack": rc, "properties": {...}}, {"subscribed": [codes]}, {"pubrec": n},
{"published": mid}, {"message": {...}}, {"disconnect": rc}, {"done": true}.
--sub-id N gives the --sub at the same place the Subscription Identifier N, each such
filter in a SUBSCRIBE of its own. After CONNACK (and every SUBACK when subscribing) it publishes --count messages to --pub,
User Properties in the order given. --hold-pubrel: QoS 2 PUBRELs are held back (an
application that has not finished with its messages); --release-then N: once every
PUBREC is in, the held PUBRELs go, then N more publishes; --more N: once every PUBREC is
in, N more publishes, PUBRELs still held. paho 1.6 leaves incoming topic
aliases to the application: this one keeps the map, as the MQTT 5 spec asks a receiver to.
"""
import argparse
import json
import sys
import threading

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


def args():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("--v311", action="store_true")
    p.add_argument("--id", default="")
    p.add_argument("--topic-alias-max", type=int)
    p.add_argument("--max-packet", type=int)
    p.add_argument("--auth-method")
    p.add_argument("--sub", action="append", default=[])
    p.add_argument("--sub-id", type=int, action="append", default=[])
    p.add_argument("--qos", type=int, default=0)
    p.add_argument("--pub")
    p.add_argument("--prop", action="append", default=[])
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--payload", default="x")
    p.add_argument("--hold-pubrel", action="store_true")
    p.add_argument("--release-then", type=int)
    p.add_argument("--more", type=int)
    p.add_argument("--expect", type=int)
    p.add_argument("--seconds", type=float, default=10)
    return p.parse_args()


# paho's network thread and the main thread both report: one line at a time, whole (two
# unlocked prints once landed on one line and the test's reader could not parse it).
say_lock = threading.Lock()


def say(**fields):
    line = json.dumps(fields) + "\n"
    with say_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def props_dict(props):
    if props is None:
        return {}
    out = {}
    for name in ("UserProperty", "SubscriptionIdentifier", "TopicAlias", "MaximumPacketSize", "ReceiveMaximum", "TopicAliasMaximum", "ReasonString", "ContentType",
                 "MaximumQoS", "RetainAvailable", "WildcardSubscriptionAvailable", "SharedSubscriptionAvailable",
                 "SubscriptionIdentifierAvailable", "ServerKeepAlive"):
        if hasattr(props, name):
            out[name] = getattr(props, name)
    return out


a = args()
v5 = not a.v311
client = mqtt.Client(client_id=a.id, protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311)
client.max_inflight_messages_set(65535)
client.max_queued_messages_set(0)
done = threading.Event()
received = 0
subacks = 0
aliases = {}
pubrecs = 0
held = []
real_send_pubrel = client._send_pubrel


def hold_pubrel(mid):
    held.append(mid)
    return mqtt.MQTT_ERR_SUCCESS


if a.hold_pubrel:
    client._send_pubrel = hold_pubrel


def publish_all(n):
    for i in range(n):
        props = None
        if a.prop and v5:
            props = Properties(PacketTypes.PUBLISH)
            props.UserProperty = [tuple(kv.split("=", 1)) for kv in a.prop]
        client.publish(a.pub, a.payload if n == 1 else f"{a.payload}-{i}", qos=a.qos, properties=props)


def start_publishing():
    if a.pub:
        publish_all(a.count)


def on_connect(c, userdata, flags, rc, properties=None):
    say(connack=rc.value if hasattr(rc, "value") else rc, properties=props_dict(properties))
    if (rc.value if hasattr(rc, "value") else rc) != 0:
        done.set()
        return
    if a.sub_id:
        for f, sid in zip(a.sub, a.sub_id):
            sub_props = Properties(PacketTypes.SUBSCRIBE)
            sub_props.SubscriptionIdentifier = sid
            c.subscribe(f, a.qos, properties=sub_props)
    elif a.sub:
        c.subscribe([(f, a.qos) for f in a.sub])
    else:
        start_publishing()


def on_subscribe(c, userdata, mid, granted, properties=None):
    global subacks
    say(subscribed=[g.value if hasattr(g, "value") else g for g in granted])
    subacks += 1
    if subacks == max(1, len(a.sub_id)):
        start_publishing()


def on_message(c, userdata, msg):
    global received
    # A 3.1.1 message has no properties attribute at all.
    msg_props = getattr(msg, "properties", None)
    alias = getattr(msg_props, "TopicAlias", None) if msg_props else None
    topic = msg.topic
    if alias is not None:
        if topic:
            aliases[alias] = topic
        else:
            topic = aliases.get(alias, "")
    say(message={"topic": topic, "wire_topic": msg.topic, "alias": alias, "qos": msg.qos, "size": len(msg.payload),
                 "payload": msg.payload[:64].decode("utf-8", "replace"), "properties": props_dict(msg_props)})
    received += 1
    if a.expect is not None and received >= a.expect:
        done.set()


def on_publish(c, userdata, mid):
    say(published=mid)


def on_disconnect(c, userdata, rc, properties=None):
    say(disconnect=rc.value if hasattr(rc, "value") else rc, properties=props_dict(properties))
    done.set()


# Count the PUBRECs as paho reads them (before its own handling, which calls _send_pubrel).
real_handle_pubrec = client._handle_pubrec


def counting_pubrec():
    global pubrecs
    rc = real_handle_pubrec()
    pubrecs += 1
    say(pubrec=pubrecs)
    if a.release_then is not None and pubrecs == a.count:
        client._send_pubrel = real_send_pubrel
        for mid in held:
            real_send_pubrel(mid)
        held.clear()
        publish_all(a.release_then)
    elif a.more is not None and pubrecs == a.count:
        publish_all(a.more)
    return rc


client._handle_pubrec = counting_pubrec
client.on_connect = on_connect
client.on_subscribe = on_subscribe
client.on_message = on_message
client.on_publish = on_publish
client.on_disconnect = on_disconnect

props = None
if v5:
    props = Properties(PacketTypes.CONNECT)
    if a.topic_alias_max is not None:
        props.TopicAliasMaximum = a.topic_alias_max
    if a.max_packet is not None:
        props.MaximumPacketSize = a.max_packet
    if a.auth_method is not None:
        props.AuthenticationMethod = a.auth_method
client.connect("127.0.0.1", a.port, keepalive=30, clean_start=True, properties=props) if v5 else client.connect("127.0.0.1", a.port, keepalive=30)
client.loop_start()
done.wait(a.seconds)
say(done=True, received=received, pubrecs=pubrecs)
client.loop_stop()
