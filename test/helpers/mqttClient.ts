import mqtt, { type IClientOptions, type MqttClient } from "mqtt";

export type ConnectedClient = MqttClient & { connack: mqtt.IConnackPacket };

/**
 * An mqtt.js client that resolves once connected (or rejects with the CONNACK error).
 * `before` sees the client before it connects: a resumed session's messages can arrive
 * in the same read as the CONNACK, before anything attached after the promise resolves.
 */
export function connectMqtt(
  port: number,
  options: IClientOptions = {},
  before?: (client: MqttClient) => void,
): Promise<ConnectedClient> {
  const client = mqtt.connect({
    host: "127.0.0.1",
    port,
    reconnectPeriod: 0,
    connectTimeout: 5_000,
    ...options,
  }) as ConnectedClient;
  before?.(client);
  return new Promise((resolve, reject) => {
    client.once("connect", (connack) => {
      client.connack = connack;
      resolve(client);
    });
    client.once("error", (e) => {
      client.end(true);
      reject(e);
    });
    client.once("close", () => reject(new Error("closed before CONNACK")));
  });
}

/** Connects and collects the client's messages from its first byte on. */
export async function connectCollecting(port: number, options: IClientOptions = {}) {
  let inbox: ReturnType<typeof collect> | undefined;
  const client = await connectMqtt(port, options, (c) => {
    inbox = collect(c);
  });
  return { client, inbox: inbox! };
}

/** Collects messages of a client; `next(n)` waits for the n-th. */
export function collect(client: MqttClient) {
  const seen: Array<{ topic: string; payload: Buffer; packet: mqtt.IPublishPacket }> = [];
  const waiters: Array<() => void> = [];
  client.on("message", (topic, payload, packet) => {
    seen.push({ topic, payload, packet });
    for (const w of waiters.splice(0)) w();
  });
  return {
    seen,
    async count(n: number, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs;
      while (seen.length < n) {
        const left = deadline - Date.now();
        if (left <= 0)
          throw new Error(`expected ${n} messages, got ${seen.length}: ${seen.map((s) => s.topic).join(", ")}`);
        await new Promise<void>((r) => {
          const t = setTimeout(r, left);
          waiters.push(() => {
            clearTimeout(t);
            r();
          });
        });
      }
      return seen;
    },
  };
}
