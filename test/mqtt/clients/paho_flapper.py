"""One client id connecting and leaving over and over with Debian's paho-mqtt (1.6), MQTT 3.1.1.

usage: paho_flapper.py PORT CLIENT_ID CYCLES FILTER

Even cycles keep their session (clean session 0) and subscribe FILTER at QoS 1; odd cycles
start clean. Every third cycle drops its socket instead of sending DISCONNECT. Each cycle
connects the moment the previous one has gone, as a device on a flaky link does. Prints
{"cycles": n} when done, or {"error": "..."} and exits 1.
"""
import sys
import threading

import paho.mqtt.client as mqtt
from jsonlines import emit as say


def cycle(port, client_id, i, topic):
    persistent = i % 2 == 0
    c = mqtt.Client(client_id=client_id, clean_session=not persistent, protocol=mqtt.MQTTv311)
    connected = threading.Event()
    subscribed = threading.Event()
    outcome = {}

    def on_connect(client, userdata, flags, rc):
        outcome["rc"] = rc
        connected.set()

    c.on_connect = on_connect
    c.on_subscribe = lambda client, userdata, mid, granted: subscribed.set()
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    try:
        if not connected.wait(10) or outcome["rc"] != 0:
            raise RuntimeError(f"cycle {i}: no CONNACK 0 ({outcome.get('rc')})")
        if persistent:
            c.subscribe(topic, qos=1)
            if not subscribed.wait(10):
                raise RuntimeError(f"cycle {i}: no SUBACK")
        if i % 3 == 0:
            c.socket().close()
        else:
            c.disconnect()
    finally:
        c.loop_stop()


def main():
    port, client_id, cycles, topic = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    try:
        for i in range(cycles):
            cycle(port, client_id, i, topic)
    except Exception as e:  # noqa: BLE001 - the test reads the reason
        say({"error": str(e)})
        sys.exit(1)
    say({"cycles": cycles})


main()
