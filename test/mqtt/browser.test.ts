// Issue 14, item 7: MQTT over WebSocket from a real browser. A page served here loads
// mqtt.js's browser bundle in headless Chromium, connects to the gateway's /mqtt with the
// subprotocol "mqtt", and talks with a NATS client on the embedded nats-server, both ways,
// MQTT 3.1.1 and 5.
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../helpers/chromium.js";
import { type GatewayHandle, startEmbeddedGateway } from "../helpers/gateway.js";

const PAGE_WAIT = 30_000;
const bundle = readFileSync(
  join(createRequire(import.meta.url).resolve("mqtt/package.json"), "..", "dist", "mqtt.min.js"),
);

// The page keeps what happens in `window.seen`; every WebSocket it opens is kept too, so
// the test can read the subprotocol the gateway chose.
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>mqtt.js in the browser</title>
<script>
  window.sockets = [];
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) { super(...args); window.sockets.push(this); }
  };
  window.seen = { messages: [], errors: [] };
</script>
<script src="/mqtt.min.js"></script>
</head><body><p>mqtt.js browser bundle</p></body></html>`;

describe("mqtt.js's browser bundle in headless Chromium, over WebSocket /mqtt", () => {
  let gw: GatewayHandle & { natsUrl: string };
  let nc: NatsConnection;
  let site: Server;
  let sitePort: number;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;

  beforeAll(async () => {
    gw = await startEmbeddedGateway({ mqtt: { listen: "127.0.0.1:0", websocket: "127.0.0.1:0" } });
    nc = await connect({ servers: gw.natsUrl });
    site = createServer((req, res) => {
      if (req.url === "/mqtt.min.js") res.writeHead(200, { "content-type": "text/javascript" }).end(bundle);
      else res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    });
    await new Promise<void>((r) => site.listen(0, "127.0.0.1", r));
    sitePort = (site.address() as { port: number }).port;
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${sitePort}/`, { timeout: PAGE_WAIT });
    await page.waitForFunction(() => typeof (window as unknown as { mqtt?: unknown }).mqtt === "object", undefined, {
      timeout: PAGE_WAIT,
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.dispose();
    await new Promise((r) => site?.close(r));
    await nc?.close();
    await gw?.stop();
  });

  for (const protocolVersion of [4, 5] as const) {
    it(`MQTT ${protocolVersion === 4 ? "3.1.1" : "5"}: subscribe and publish from the page, a NATS client on the other side`, {
      timeout: 60_000,
    }, async () => {
      const tag = `v${protocolVersion}x${process.pid}`;
      const url = `ws://127.0.0.1:${gw.port("mqtt_ws")}/mqtt`;
      // Browser -> gateway: CONNECT, SUBSCRIBE (SUBACK awaited), then a PUBLISH.
      const fromBrowser = new Promise<string>((resolve) => {
        nc.subscribe(`browser.${tag}.out`, { max: 1, callback: (_e, m) => resolve(m.string()) });
      });
      await nc.flush();
      const opened = await page.evaluate(
        ([u, v, t]) =>
          new Promise<{ protocol: string; granted: number[] }>((resolve, reject) => {
            const w = window as unknown as {
              mqtt: {
                connect(
                  url: string,
                  o: object,
                ): {
                  on(e: string, f: (...a: unknown[]) => void): void;
                  subscribe(t: string, o: object, f: (e: unknown, g: Array<{ qos: number }>) => void): void;
                  publish(t: string, p: string, o: object): void;
                };
              };
              seen: { messages: Array<{ topic: string; payload: string }>; errors: string[] };
              sockets: WebSocket[];
              client?: unknown;
            };
            const client = w.mqtt.connect(u, { protocolVersion: v, clientId: `browser-${t}`, reconnectPeriod: 0 });
            w.client = client;
            client.on("error", (e) => w.seen.errors.push(String(e)));
            client.on("message", (topic, payload) =>
              w.seen.messages.push({ topic: String(topic), payload: String(payload) }),
            );
            client.on("connect", () => {
              client.subscribe(`browser/${t}/in`, { qos: 1 }, (err, granted) => {
                if (err) return reject(String(err));
                client.publish(`browser/${t}/out`, `hello from chromium ${t}`, { qos: 1 });
                resolve({ protocol: w.sockets[w.sockets.length - 1]!.protocol, granted: granted.map((g) => g.qos) });
              });
            });
          }),
        [url, protocolVersion, tag] as const,
      );
      expect(opened).toEqual({ protocol: "mqtt", granted: [1] });
      expect(await fromBrowser).toBe(`hello from chromium ${tag}`);
      // NATS -> browser.
      nc.publish(`browser.${tag}.in`, `hello from nats ${tag}`);
      await page.waitForFunction(
        (n) => (window as unknown as { seen: { messages: unknown[] } }).seen.messages.length >= n,
        1,
        { timeout: PAGE_WAIT, polling: 50 },
      );
      const seen = await page.evaluate(() => {
        const w = window as unknown as {
          seen: { messages: unknown[]; errors: string[] };
          client: { end(force: boolean): void };
        };
        w.client.end(true);
        const out = { messages: w.seen.messages.splice(0), errors: w.seen.errors.splice(0) };
        return out;
      });
      expect(seen).toEqual({
        messages: [{ topic: `browser/${tag}/in`, payload: `hello from nats ${tag}` }],
        errors: [],
      });
    });
  }
});
