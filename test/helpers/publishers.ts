// Third-party MQTT publishers as real clients run them: Debian's mosquitto_pub (one process
// per message) and python3-paho-mqtt (a fresh client per message, so every message is
// packet id 1 after a reconnect with the same client id).
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** One `mosquitto_pub` process per message, all with one client id (each a clean start, packet id 1). */
export async function mosquittoPub(
  port: number,
  version: 4 | 5,
  clientId: string,
  topic: string,
  payloads: readonly string[],
  qos: 1 | 2 = 1,
): Promise<void> {
  for (const m of payloads) {
    await run(
      "mosquitto_pub",
      [
        "-h",
        "127.0.0.1",
        "-p",
        String(port),
        "-V",
        version === 5 ? "mqttv5" : "mqttv311",
        "-i",
        clientId,
        "-q",
        String(qos),
        "-t",
        topic,
        "-m",
        m,
      ],
      { timeout: 10_000 },
    );
  }
}

const PAHO = `
import sys, time, paho.mqtt.client as mqtt
port, version, cid, topic, qos = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
def pump(c, done, what):
    deadline = time.time() + 10
    while not done():
        if time.time() > deadline:
            sys.exit("timed out waiting for " + what)
        c.loop(0.01)
for payload in sys.argv[6:]:
    if version == 5:
        c = mqtt.Client(client_id=cid, protocol=mqtt.MQTTv5)
        c.connect("127.0.0.1", port, clean_start=True)
    else:
        c = mqtt.Client(client_id=cid, clean_session=True, protocol=mqtt.MQTTv311)
        c.connect("127.0.0.1", port)
    pump(c, c.is_connected, "CONNACK")
    info = c.publish(topic, payload, qos=qos)
    if info.mid != 1:
        sys.exit("packet id %d, not 1" % info.mid)
    pump(c, info.is_published, "the PUBACK of " + payload)
    c.disconnect()
print("ok")
`;

/** Debian's python3-paho-mqtt (1.6): a new client per message with one client id, each publish packet id 1, waited for its PUBACK. */
export async function pahoPub(
  port: number,
  version: 4 | 5,
  clientId: string,
  topic: string,
  payloads: readonly string[],
  qos: 1 | 2 = 1,
): Promise<void> {
  const { stdout } = await run(
    "/usr/bin/python3",
    ["-c", PAHO, String(port), String(version), clientId, topic, String(qos), ...payloads],
    { timeout: 60_000 },
  );
  if (!stdout.includes("ok")) throw new Error(`paho: ${stdout}`);
}
