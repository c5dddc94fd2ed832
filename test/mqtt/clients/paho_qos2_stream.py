"""A QoS 2 publisher with Debian's paho-mqtt (1.6), MQTT 3.1.1, that keeps its session.

usage: paho_qos2_stream.py PORT CLIENT_ID TOPIC COUNT RATE

Queues COUNT QoS 2 publishes (payloads "0".."COUNT-1"), RATE a second (0: all at once), with clean session 0 and lets paho
do the rest: at most 20 in flight, and when the connection drops, reconnecting to the
same port (a restarted gateway) and resending what was in flight as paho does (PUBLISH
with DUP set, or PUBREL). Prints {"done": n, "connects": n} every 250 completed (PUBCOMP), then
{"finished": COUNT, "connects": n, "pubrels_kept": n}; {"error": "..."} and exit 1 when it stalls.

paho-mqtt 1.6.1 resends a PUBLISH it has already released (a protocol violation: "MUST NOT
re-send the PUBLISH once it has sent the corresponding PUBREL", MQTT 3.1.1 4.3.3) when a
reconnect attempt fails before one succeeds: `reconnect()` runs its reset of the outgoing
messages before connecting, so a second attempt turns the first attempt's
`mqtt_ms_resend_pubrel` into `mqtt_ms_publish`, with DUP unset. Its receiver must take that
PUBLISH as a new message (the exchange ended at PUBREL), so it is stored twice. Here the reset
keeps what the client owes as PUBREL, as paho's own first pass meant it to, so the test sees
what the gateway does, not that bug; `pubrels_kept` counts how often it mattered.
"""
import sys
import threading
import time

import paho.mqtt.client as mqtt
from jsonlines import emit as say


def keep_pubrels_across_attempts(client, state, lock):
    reset = client._messages_reconnect_reset_out
    kept = set()

    def reset_keeping_pubrels():
        with client._out_message_mutex:
            owed = [m for m in client._out_messages.values() if m.state == mqtt.mqtt_ms_resend_pubrel]
        reset()
        with client._out_message_mutex:
            for m in owed:
                m.state = mqtt.mqtt_ms_resend_pubrel
        with lock:
            kept.update(m.mid for m in owed)
            state["pubrels_kept"] = len(kept)

    client._messages_reconnect_reset_out = reset_keeping_pubrels


def main():
    port, client_id, topic, count, rate = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    ahead_max = int(sys.argv[6]) if len(sys.argv) > 6 else 40
    c = mqtt.Client(client_id=client_id, clean_session=False, protocol=mqtt.MQTTv311)
    c.reconnect_delay_set(min_delay=1, max_delay=1)
    state = {"done": 0, "connects": 0, "pubrels_kept": 0}
    lock = threading.Lock()
    keep_pubrels_across_attempts(c, state, lock)
    finished = threading.Event()
    connected = threading.Event()

    def on_connect(client, userdata, flags, rc):
        with lock:
            state["connects"] += 1
        connected.set()

    def on_publish(client, userdata, mid):
        with lock:
            state["done"] += 1
            done, connects = state["done"], state["connects"]
        if done % 250 == 0:
            say({"done": done, "connects": connects})
        if done == count:
            finished.set()

    c.on_connect = on_connect
    c.on_publish = on_publish
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    if not connected.wait(15):
        say({"error": "no CONNACK"})
        sys.exit(1)
    # Paced (RATE a second, and never more than 40 beyond what is complete, so nothing
    # piles up while the gateway is away), that a test's kills land mid-stream however
    # fast the gateway is; paho still keeps up to 20 in flight. Unpaced (RATE 0), paho
    # queues the rest, and sends all of it at once at each reconnect.
    for i in range(count if rate > 0 else 0):
        next_at = time.monotonic() + 1 / rate
        while True:
            with lock:
                done = state["done"]
            if i - done < ahead_max:
                break
            time.sleep(0.005)
        c.publish(topic, str(i).encode(), qos=2)
        ahead = next_at - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    for i in range(count if rate <= 0 else 0):
        c.publish(topic, str(i).encode(), qos=2)
    last, since = -1, time.monotonic()
    while not finished.wait(1):
        with lock:
            done = state["done"]
        if done != last:
            last, since = done, time.monotonic()
        elif time.monotonic() - since > 60:
            say({"error": f"stalled at {done} of {count}"})
            sys.exit(1)
    c.disconnect()
    c.loop_stop()
    say({"finished": count, "connects": state["connects"], "pubrels_kept": state["pubrels_kept"]})


main()
