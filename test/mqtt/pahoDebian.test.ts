// Issue 22, item 4: Debian 12's paho-mqtt 1.6.1 reads a PUBACK, PUBREC, PUBREL or PUBCOMP
// of MQTT 5 only in its shortest form (remaining length 2); a PUBREL with a reason code
// and an empty property block killed its network thread at QoS 2. It subscribes and
// publishes to itself at QoS 0, 1 and 2 over MQTT 5 and 3.1.1: every message arrives once
// and the client stays connected.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startEmbeddedGateway } from "../helpers/gateway.js";
import { eventually } from "../helpers/poll.js";
import { runPython } from "../helpers/python.js";

const paho = (args: string[]) => runPython(join(import.meta.dirname, "clients", "paho_client.py"), args);
let n = 0;
const unique = (prefix: string) => `${prefix}${process.pid}x${++n}`;

describe("Debian's paho-mqtt 1.6.1 through the gateway at every QoS", () => {
  let gw: GatewayHandle;
  beforeAll(async () => {
    gw = await startEmbeddedGateway();
  });
  afterAll(async () => {
    await gw?.stop();
  });

  const cases = [5, 4].flatMap((version) => [0, 1, 2].map((qos) => ({ version, qos })));
  it.each(cases)(
    "MQTT $version, QoS $qos: three messages to itself arrive once each, no disconnect",
    async ({ version, qos }) => {
      const topic = unique(`paho/q${qos}v${version}/`);
      const c = paho([
        String(gw.port("mqtt")),
        ...(version === 4 ? ["--v311"] : []),
        "--sub",
        topic,
        "--pub",
        topic,
        "--qos",
        String(qos),
        "--count",
        "3",
        "--payload",
        "m",
        "--expect",
        "3",
        "--seconds",
        "20",
      ]);
      try {
        // Its own publishes acknowledged to the end (PUBACK; PUBREC, PUBCOMP), and the three messages in.
        const count = (key: string) => c.lines.filter((l) => l[key] !== undefined).length;
        await eventually(
          () => (count("published") === 3 && count("message") === 3) || undefined,
          30_000,
          "3 acknowledged and 3 received",
        );
        const messages = c.lines
          .filter((l) => l.message !== undefined)
          .map((l) => l.message as { payload: string; qos: number });
        expect(messages.map((m) => m.payload).sort()).toEqual(["m-0", "m-1", "m-2"]);
        expect(messages.every((m) => m.qos === qos)).toBe(true);
        // Nothing closed the connection: neither the gateway nor paho's own protocol check.
        expect(c.lines.filter((l) => l.disconnect !== undefined)).toEqual([]);
      } finally {
        c.kill();
      }
    },
  );
});
