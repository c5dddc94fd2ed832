// The resume table of docs/decisions/mqtt-sessions.md, one test per row, each row lived by
// mqtt.js and by Debian's paho-mqtt 1.6.1, on one gateway and across two sharing a
// nats-server, reading the MQTT store and a bound stream. Every row starts from what the
// store holds (a session with messages queued while it was away, nothing, an expired
// session), connects as the row says, ends as it says (DISCONNECT with or without a Session
// Expiry, a dropped socket, a takeover), and a probe afterwards tells whether the session
// outlived the connection, and, past its expiry, that it did not outlive that.
import { join } from "node:path";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { IClientOptions } from "mqtt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type ConnectedClient, collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { runPython } from "../helpers/python.js";

/** Lets wall-clock time pass: a session expiry is a duration, not an event to wait on. */
const letTimePass = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The finite session expiry of the rows (s): long enough for a probe at once on a loaded machine, short enough to wait out. */
const N = 5;

/** A Session Expiry Interval property, or none at all (undefined). */
type Expiry = number | undefined;

interface Conn {
  readonly v: 4 | 5;
  readonly clean: boolean;
  readonly expiry?: Expiry;
}

type End =
  | { readonly kind: "disconnect"; readonly expiry?: Expiry }
  | { readonly kind: "drop" }
  /** A second connection of the client id while the row's is connected. */
  | { readonly kind: "takeover"; readonly by: Conn; readonly present: boolean };

interface Row {
  readonly name: string;
  /** What the sessions bucket holds when the row's connection comes. */
  readonly stored: "session" | "nothing" | "expired";
  readonly conn: Conn;
  readonly end: End;
  /** CONNACK session present, and the queued messages delivered (they come exactly when it is present). */
  readonly present: boolean;
  /** How long the session outlives the connection (s); "max": mqtt.session_expiry_max (3.1.1). Takeover rows: not probed. */
  readonly survives: 0 | number | "max" | "n/a";
}

const v5 = (clean: boolean, expiry?: Expiry): Conn => ({ v: 5, clean, expiry });
const v4 = (clean: boolean): Conn => ({ v: 4, clean });

type Asked = "absent" | "0" | "n";
const expiryOf = (a: Asked, n: number): Expiry => (a === "absent" ? undefined : a === "0" ? 0 : n);

/**
 * MQTT 5 with a stored session that missed m1 and m2: every Clean Start, CONNECT Session
 * Expiry (absent, 0, n) and end (DISCONNECT without Session Expiry, with 0, with n; the
 * socket closed without DISCONNECT). Absent on CONNECT is 0 (3.1.2.11.2); absent on
 * DISCONNECT is the CONNECT's; n on DISCONNECT after 0 on CONNECT is a protocol error
 * [MQTT-3.14.2-2] and the session still ends. Where both say n, the CONNECT's is an hour
 * and the DISCONNECT's, N, replaces it.
 */
function v5Grid(): Row[] {
  const rows: Row[] = [];
  for (const clean of [false, true])
    for (const connect of ["absent", "0", "n"] as const)
      for (const end of ["DISCONNECT", "DISCONNECT 0", "DISCONNECT n", "drop"] as const) {
        const connectExpiry = expiryOf(connect, end === "DISCONNECT n" ? 3600 : N);
        const kept = (connectExpiry ?? 0) > 0;
        rows.push({
          name: `v5 Clean Start ${clean ? 1 : 0}, CONNECT expiry ${connect}, ${end === "drop" ? "socket closed" : end === "DISCONNECT" ? "DISCONNECT without expiry" : `${end.replace("DISCONNECT", "DISCONNECT expiry")}`}`,
          stored: "session",
          conn: v5(clean, connectExpiry),
          end:
            end === "drop"
              ? { kind: "drop" }
              : { kind: "disconnect", expiry: end === "DISCONNECT" ? undefined : end === "DISCONNECT 0" ? 0 : N },
          present: !clean,
          survives: end === "DISCONNECT 0" ? 0 : kept ? N : 0,
        });
      }
  return rows;
}

/** The table of docs/decisions/mqtt-sessions.md ("Resuming: the table"), row for row. */
const rows: Row[] = [
  ...v5Grid(),
  {
    name: "v5 Clean Start 0, expiry n, nothing stored",
    stored: "nothing",
    conn: v5(false, N),
    end: { kind: "disconnect" },
    present: false,
    survives: N,
  },
  {
    name: "v5 Clean Start 0, expiry n, the stored session expired",
    stored: "expired",
    conn: v5(false, N),
    end: { kind: "disconnect" },
    present: false,
    survives: N,
  },
  {
    name: "takeover: v5 Clean Start 0 expiry n, then Clean Start 0",
    stored: "session",
    conn: v5(false, 3600),
    end: { kind: "takeover", by: v5(false, 3600), present: true },
    present: true,
    survives: "n/a",
  },
  {
    name: "takeover: v5 Clean Start 0 expiry n, then Clean Start 1",
    stored: "session",
    conn: v5(false, 3600),
    end: { kind: "takeover", by: v5(true, 3600), present: false },
    present: true,
    survives: "n/a",
  },
  {
    name: "takeover: v5 Clean Start 0 expiry absent, then Clean Start 0",
    stored: "session",
    conn: v5(false),
    end: { kind: "takeover", by: v5(false, 3600), present: false },
    present: true,
    survives: "n/a",
  },
  {
    name: "takeover: v5 Clean Start 1 expiry n, then Clean Start 0 expiry absent",
    stored: "nothing",
    conn: v5(true, 3600),
    end: { kind: "takeover", by: v5(false), present: true },
    present: false,
    survives: "n/a",
  },
  {
    name: "3.1.1 clean session 0, DISCONNECT",
    stored: "session",
    conn: v4(false),
    end: { kind: "disconnect" },
    present: true,
    survives: "max",
  },
  {
    name: "3.1.1 clean session 0, socket closed",
    stored: "session",
    conn: v4(false),
    end: { kind: "drop" },
    present: true,
    survives: "max",
  },
  {
    name: "3.1.1 clean session 1",
    stored: "session",
    conn: v4(true),
    end: { kind: "disconnect" },
    present: false,
    survives: 0,
  },
  {
    name: "takeover: 3.1.1 clean session 0, then clean session 0",
    stored: "session",
    conn: v4(false),
    end: { kind: "takeover", by: v4(false), present: true },
    present: true,
    survives: "n/a",
  },
  {
    name: "takeover: 3.1.1 clean session 0, then clean session 1",
    stored: "session",
    conn: v4(false),
    end: { kind: "takeover", by: v4(true), present: false },
    present: true,
    survives: "n/a",
  },
];

type Client = "mqtt.js" | "paho";
/** Where each connection of a scenario goes: all on one gateway, or alternating between the two. */
type Placement = "one gateway" | "across two";
/** Topics under the binding (`plant/...`, a stream of the operator's) or not (the MQTT store). */
type Storage = "MQTT store" | "bound stream";
interface Variant {
  readonly client: Client;
  readonly placement: Placement;
  readonly storage: Storage;
  /** Probe after the expiry instead of at once: the session is gone by then. */
  readonly late?: boolean;
}

/** Each client on both placements and both stores; the wait past the expiry once per client. */
const variants: Variant[] = [
  { client: "mqtt.js", placement: "one gateway", storage: "MQTT store" },
  { client: "mqtt.js", placement: "across two", storage: "bound stream" },
  { client: "paho", placement: "one gateway", storage: "bound stream" },
  { client: "paho", placement: "across two", storage: "MQTT store" },
  { client: "mqtt.js", placement: "across two", storage: "MQTT store", late: true },
  { client: "paho", placement: "one gateway", storage: "bound stream", late: true },
];

/**
 * m4, and nothing else new: m3 may come again before it, with DUP, when the client's PUBACK
 * had not reached the gateway when its connection ended (a socket closed right after m3, a
 * takeover read first), as MQTT 4.4 asks; m3 without DUP would be a duplicate.
 */
async function onlyM4(inbox: ReturnType<typeof collect>, what: string): Promise<void> {
  await eventually(
    () => (inbox.seen.some((m) => m.payload.toString() === "m4") ? true : undefined),
    10_000,
    `${what}: m4`,
  );
  const again = inbox.seen.filter((m) => m.payload.toString() === "m3");
  expect(
    inbox.seen.filter((m) => m.payload.toString() !== "m3").map((m) => m.payload.toString()),
    what,
  ).toEqual(["m4"]);
  expect(
    again.every((m) => m.packet.dup),
    `${what}: m3 again without DUP`,
  ).toBe(true);
}

/** At most this many scenarios at once (each runs a few clients, paho a process): the machine has two cores. */
const running = (() => {
  let free = 8;
  const waiting: Array<() => void> = [];
  return async <T>(f: () => Promise<T>): Promise<T> => {
    if (free > 0) free--;
    else await new Promise<void>((r) => waiting.push(r));
    try {
      return await f();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else free++;
    }
  };
})();

/** What the row's connection saw. */
interface Seen {
  present: boolean;
  /** Payloads before m3 (the queued ones), in order. */
  queued: string[];
  /** Reason code of the server's DISCONNECT (v5) or "closed" (3.1.1), for takeover rows. */
  takenOver?: number | "closed";
}

describe("resuming MQTT sessions: the table of docs/decisions/mqtt-sessions.md", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let gws: [GatewayHandle, GatewayHandle];
  let pubs: ConnectedClient[];
  let seq = 0;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "PLANT", subjects: ["plant.>"] });
    const config = { bindings: [{ stream: "PLANT" }] };
    gws = await Promise.all([startGateway({ nats: nats.url, config }), startGateway({ nats: nats.url, config })]);
    pubs = await Promise.all(gws.map((g) => connectMqtt(g.port("mqtt"), { protocolVersion: 5 })));
  }, 60_000);
  afterAll(async () => {
    await Promise.all((pubs ?? []).map((p) => p.endAsync()));
    await nc?.close();
    await Promise.all((gws ?? []).map((g) => g.stop()));
    await nats?.stop();
  });

  /** The consumers reading `subject` (in the stream that keeps it). */
  async function consumersOf(storage: Storage, subject: string, since: number): Promise<string[]> {
    const stream = storage === "bound stream" ? "PLANT" : "MQGW_MSGS";
    const names: string[] = [];
    for await (const c of jsm.consumers.list(stream)) {
      const filters = c.config.filter_subjects ?? (c.config.filter_subject ? [c.config.filter_subject] : []);
      if (filters.some((f) => f.endsWith(subject)) && Date.parse(c.created) >= since) names.push(c.name);
    }
    return names;
  }

  /** Connects with mqtt.js as `c` says, collecting from the first byte. */
  async function mqttjs(
    port: number,
    clientId: string,
    c: Conn,
    more: IClientOptions = {},
    onWire?: (payload: string) => void,
  ) {
    let inbox: ReturnType<typeof collect> | undefined;
    const client = await connectMqtt(
      port,
      {
        protocolVersion: c.v,
        clientId,
        clean: c.clean,
        resubscribe: false,
        ...(c.expiry !== undefined ? { properties: { sessionExpiryInterval: c.expiry } } : {}),
        ...more,
      },
      (cl) => {
        inbox = collect(cl);
        if (onWire)
          cl.on("packetreceive", (p) => {
            if (p.cmd === "publish") onWire(p.payload.toString());
          });
      },
    );
    return { client, inbox: inbox! };
  }

  async function scenario(row: Row, variant: Variant): Promise<void> {
    const id = `resume-${++seq}-${variant.client === "paho" ? "p" : "j"}`;
    const topic = `${variant.storage === "bound stream" ? "plant" : "kept"}/resume/${id}`;
    const subject = topic.replaceAll("/", ".");
    // Where the setup, the row's connection, the takeover and the probe connect.
    const [setupGw, rowGw, takeoverGw, probeGw] =
      variant.placement === "one gateway" ? [gws[0], gws[0], gws[0], gws[0]] : [gws[0], gws[1], gws[0], gws[1]];
    const pub = pubs[0]!;
    const qos = 2;

    // What the store holds: a session (expiry 3600, or 1 s let run out) that missed m1 (QoS 1) and m2 (QoS 2).
    if (row.stored !== "nothing") {
      const expiry = row.stored === "expired" ? 1 : 3600;
      const { client } = await mqttjs(setupGw.port("mqtt"), id, v5(true, expiry));
      await client.subscribeAsync(topic, { qos });
      await client.endAsync();
      await pub.publishAsync(topic, "m1", { qos: 1 });
      await pub.publishAsync(topic, "m2", { qos: 2 });
      if (row.stored === "expired") await letTimePass(2_000);
    }

    // The row's connection: its CONNACK, what it is given, m3 live, then its end.
    const rowStart = Date.now();
    const seen: Seen = { present: false, queued: [] };
    const end = row.end;
    let endedAt = 0;
    const wanted = row.present ? ["m1", "m2", "m3"] : ["m3"];
    /** Waits for what the row should be given, then says what came before m3. */
    const given = async (delivered: () => string[], wireOrder: boolean): Promise<string[]> => {
      const all = await eventually(
        () => {
          const now = delivered();
          return wanted.every((w) => now.includes(w)) ? now : undefined;
        },
        10_000,
        `${id}: ${wanted.join(", ")}`,
      ).catch(() => delivered());
      // paho hands a QoS 2 message to the application at PUBREL, after a QoS 1 one that came later.
      return wireOrder ? all.slice(0, all.indexOf("m3")) : all.filter((m) => m !== "m3").sort();
    };
    if (variant.client === "mqtt.js") {
      // In the order they came on the wire (mqtt.js, too, emits a QoS 2 message at PUBREL).
      const wire: string[] = [];
      const { client } = await mqttjs(rowGw.port("mqtt"), id, row.conn, {}, (p) => {
        if (!wire.includes(p)) wire.push(p);
      });
      seen.present = client.connack.sessionPresent;
      client.on("disconnect", (p) => {
        seen.takenOver = p.reasonCode ?? 0;
      });
      if (!seen.present) await client.subscribeAsync(topic, { qos });
      await pub.publishAsync(topic, "m3", { qos: 1 });
      seen.queued = await given(() => wire, true);
      if (end.kind === "disconnect") {
        await client.endAsync(
          false,
          row.conn.v === 5 && end.expiry !== undefined
            ? { reasonCode: 0, properties: { sessionExpiryInterval: end.expiry } }
            : {},
        );
      } else if (end.kind === "drop") client.stream.destroy();
      else {
        await takeover(end, takeoverGw, id, topic, async () => {
          if (row.conn.v === 4) await eventually(() => (client.connected ? undefined : true), 10_000, `${id} closed`);
          else await eventually(() => seen.takenOver, 10_000, `${id}: DISCONNECT`);
          if (row.conn.v === 4) seen.takenOver = "closed";
        });
        client.end(true);
      }
      endedAt = Date.now();
    } else {
      const paho = runPython(join(import.meta.dirname, "clients", "paho_resume.py"), [
        String(rowGw.port("mqtt")),
        "--id",
        id,
        ...(row.conn.v === 4 ? ["--v311"] : []),
        "--clean",
        row.conn.clean ? "1" : "0",
        ...(row.conn.expiry !== undefined ? ["--expiry", String(row.conn.expiry)] : []),
        "--sub",
        topic,
        "--qos",
        String(qos),
        "--until",
        "m3",
        "--end",
        end.kind === "takeover" ? "hold" : end.kind,
        ...(end.kind === "disconnect" && end.expiry !== undefined ? ["--disconnect-expiry", String(end.expiry)] : []),
      ]);
      try {
        const connack = await paho.line((l) => "connack" in l);
        expect(connack.connack).toBe(0);
        seen.present = connack.present === true;
        if (!seen.present) await paho.line((l) => "subscribed" in l);
        await pub.publishAsync(topic, "m3", { qos: 1 });
        seen.queued = await given(() => paho.lines.filter((l) => "message" in l).map((l) => String(l.message)), false);
        if (end.kind === "takeover") {
          await takeover(end, takeoverGw, id, topic, async () => {
            const d = await paho.line((l) => "disconnect" in l);
            seen.takenOver = row.conn.v === 4 ? "closed" : Number(d.disconnect);
          });
        }
        await paho.line((l) => "done" in l);
        endedAt = Date.now();
        expect(await paho.exit()).toBe(0);
      } finally {
        paho.kill();
      }
    }

    // What the row's connection was given.
    expect(seen.present, `${id} session present`).toBe(row.present);
    expect(seen.queued, `${id} queued messages delivered`).toEqual(row.present ? ["m1", "m2"] : []);
    if (end.kind === "takeover") expect(seen.takenOver, `${id} taken over`).toBe(row.conn.v === 5 ? 0x8e : "closed");
    if (row.survives === "n/a") return;

    // Whether the session outlived the connection: m4 waits for it while it lives.
    const lives = variant.late ? false : row.survives !== 0;
    if (variant.late) {
      if (typeof row.survives !== "number" || row.survives === 0) return;
      await letTimePass(Math.max(0, endedAt + (row.survives + 2.5) * 1000 - Date.now()));
    }
    await pub.publishAsync(topic, "m4", { qos: 1 });
    // The probe ends whatever it finds (expiry 0): nothing of the scenario is left behind.
    const { client: probe, inbox } = await mqttjs(probeGw.port("mqtt"), id, v5(false));
    try {
      expect(probe.connack.sessionPresent, `${id} session outlived its connection`).toBe(lives);
      if (lives) await onlyM4(inbox, `${id}: what waited for the session`);
    } finally {
      await probe.endAsync();
    }
    // The sessions of the row and the probe ended: no consumer they made is left. (One of a
    // session that expired unresumed goes only after its inactive threshold, a minute.)
    if (!variant.late)
      await eventually(
        async () => ((await consumersOf(variant.storage, subject, rowStart)).length === 0 ? true : undefined),
        10_000,
        `${id}: no consumer left`,
      );
  }

  /** A second connection of the client id (mqtt.js) while the row's is connected: the first is closed, the second finds the session or not. */
  async function takeover(
    end: Extract<End, { kind: "takeover" }>,
    gw: GatewayHandle,
    id: string,
    topic: string,
    firstClosed: () => Promise<void>,
  ): Promise<void> {
    const { client, inbox } = await mqttjs(gw.port("mqtt"), id, end.by);
    try {
      await firstClosed();
      expect(client.connack.sessionPresent, `${id} taken over: session present`).toBe(end.present);
      if (end.present) {
        // The session's subscription goes on with the new connection.
        await pubs[0]!.publishAsync(topic, "m4", { qos: 1 });
        await onlyM4(inbox, `${id}: what the session got after the takeover`);
      }
    } finally {
      // Ends the session, whatever it was (3.1.1 clean session 0 keeps it: a clean connection ends it).
      if (end.by.v === 5) await client.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
      else {
        await client.endAsync();
        const { client: clean } = await mqttjs(gw.port("mqtt"), id, v4(true));
        await clean.endAsync();
      }
    }
  }

  // A test per row, by name (`it.for`'s "$name" would cut the names short).
  for (const row of rows)
    it.concurrent(row.name, { timeout: 120_000 }, async () => {
      const failures: string[] = [];
      await Promise.all(
        variants.map((variant) =>
          running(() => scenario(row, variant)).catch((e: Error) => {
            failures.push(
              `${variant.client}, ${variant.placement}, ${variant.storage}${variant.late ? ", probed after the expiry" : ""}: ${e.message}`,
            );
          }),
        ),
      );
      expect(failures).toEqual([]);
    });
});
