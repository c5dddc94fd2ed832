// Issue 4: SASL EXTERNAL with a client certificate that the TLS listener verified
// (docs/decisions/amqp-sasl-external.md). The certificate's name is the client's
// username (routing table, logs); its NATS connection has no credentials, as an MQTT
// client's over the same kind of listener without a username, so the server's
// no_auth_user is the identity whose permissions apply.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { connect as tcpConnect } from "node:net";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { certificateName, externalLogin, saslMechanisms } from "../../src/actors/amqp/sasl.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { makeCertificates } from "../helpers/tls.js";
import { AmqpClient, bodyText, collect, send } from "./rheaClient.js";

const frames = createRequire(import.meta.url)("rhea/lib/frames.js") as {
  write_frame(f: unknown): Buffer;
  sasl_frame(p: unknown): unknown;
  sasl_init(fields: Record<string, unknown>): unknown;
  read_frame(b: Buffer): { size: number; performative?: Record<string, unknown> } | null;
};

const SERVER = `
accounts {
  PLANT_A {
    users: [
      { user: "mqg-a", password: "gw-pw" }
      { user: "sensor", password: "sensor-pw" }
      { user: "certified", password: "certified-pw",
        permissions: { publish: { deny: ["forbidden.>"] }, subscribe: { deny: ["forbidden.>"] } } }
    ]
  }
}
no_auth_user: "certified"
`;

const ANSWER_MS = 10_000;
let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

interface SaslAnswer {
  mechanisms: string[];
  outcome: number | undefined;
  /** Resolves once the gateway has closed the socket. */
  closed: Promise<void>;
}

/**
 * The SASL layer as the gateway speaks it, byte for byte: its mechanisms frame, and the
 * outcome of `init` when one is sent. Resolves once the mechanisms (without `init`) or
 * the outcome (with it) arrived.
 */
function saslExchange(open: () => import("node:net").Socket, init?: Record<string, unknown>): Promise<SaslAnswer> {
  const socket = open();
  let buffer = Buffer.alloc(0);
  const closed = new Promise<void>((r) => socket.on("close", () => r()));
  return new Promise((resolve, reject) => {
    const answer: SaslAnswer = { mechanisms: [], outcome: undefined, closed };
    // A bound, not a wait: the answer normally comes within milliseconds.
    const timer = setTimeout(() => reject(new Error(`no SASL answer within ${ANSWER_MS} ms`)), ANSWER_MS);
    const done = () => {
      clearTimeout(timer);
      if (!init) socket.destroy();
      resolve(answer);
    };
    socket.on("error", () => {});
    void closed.then(() => {
      clearTimeout(timer);
      reject(new Error("closed before the SASL answer"));
    });
    socket.on("data", (d: Buffer) => {
      buffer = Buffer.concat([buffer, d]);
      if (buffer.length >= 8 && buffer.subarray(0, 4).toString() === "AMQP") buffer = buffer.subarray(8);
      for (;;) {
        const frame = buffer.length >= 8 ? frames.read_frame(buffer) : null;
        if (!frame) break;
        buffer = buffer.subarray(frame.size);
        const p = frame.performative ?? {};
        if ("sasl_server_mechanisms" in p) {
          answer.mechanisms = [p.sasl_server_mechanisms as string | string[]].flat().map(String);
          if (!init) done();
        }
        if ("code" in p) {
          answer.outcome = Number(p.code);
          done();
        }
      }
    });
    socket.write(Buffer.from([0x41, 0x4d, 0x51, 0x50, 3, 1, 0, 0]));
    if (init) socket.write(frames.write_frame(frames.sasl_frame(frames.sasl_init(init))));
  });
}

describe("SASL EXTERNAL: a verified client certificate logs in (issue 4)", () => {
  const certs = makeCertificates();
  let nats: NatsServerHandle;
  /** Offers PLAIN and EXTERNAL; its TLS listener verifies client certificates. */
  let gw: GatewayHandle;
  /** Verifies client certificates too, but EXTERNAL is not in its amqp.sasl. */
  let without: GatewayHandle;
  let nc: NatsConnection;

  const tls = (cert: boolean) => ({
    transport: "tls",
    ca: [readFileSync(certs.ca)],
    servername: "localhost",
    ...(cert ? { cert: readFileSync(certs.clientCert), key: readFileSync(certs.clientKey) } : {}),
  });

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false, config: SERVER });
    const amqpTls = {
      listen: "127.0.0.1:0",
      cert_file: certs.cert,
      key_file: certs.key,
      ca_file: certs.ca,
      verify_clients: true,
    };
    const common = {
      gateway_users: { PLANT_A: { user: "mqg-a", password: "gw-pw" } },
      routing: [{ username: "device-*", account: "PLANT_A" }],
      limits: { connect_timeout: "2s" },
    };
    [gw, without] = await Promise.all([
      startGateway({
        nats: nats.url,
        config: { ...common, amqp: { listen: "127.0.0.1:0", tls: amqpTls, sasl: ["PLAIN", "EXTERNAL"] } },
      }),
      startGateway({
        nats: nats.url,
        config: { ...common, amqp: { listen: "127.0.0.1:0", tls: amqpTls, sasl: ["PLAIN", "ANONYMOUS"] } },
      }),
    ]);
    nc = await connect({ servers: nats.url, user: "sensor", pass: "sensor-pw" });
  });
  afterAll(async () => {
    await nc?.close();
    await Promise.all([gw?.stop(), without?.stop()]);
    await nats?.stop();
  });

  it("rhea with a client certificate and EXTERNAL: connects, publishes, a NATS subscriber sees it", async () => {
    const c = await AmqpClient.open(gw.port("amqp_tls"), { ...tls(true), enable_sasl_external: true } as never);
    const subject = unique("cert.in");
    const sub = nc.subscribe(subject, { max: 1 });
    expect(await send(await c.sender(subject), { body: "from device-1" })).toEqual({ state: "accepted" });
    for await (const m of sub) expect(m.string()).toContain("from device-1");
    // The certificate's CN is the username: the routing table put it in PLANT_A.
    const line = await gw.waitForLog((l) => l.msg === "AMQP client connected" && l.mechanism === "EXTERNAL");
    expect(line).toMatchObject({ user: "device-1", account: "PLANT_A" });
    // And it receives: NATS -> the certificate's client.
    const back = unique("cert.out");
    const r = collect(await c.receiver(back));
    nc.publish(back, "to device-1");
    expect(bodyText((await r.next()).message)).toBe("to device-1");
    await c.close();
  });

  it("its NATS permissions are the mapped identity's (no_auth_user): a forbidden subject is refused", async () => {
    const c = await AmqpClient.open(gw.port("amqp_tls"), { ...tls(true), enable_sasl_external: true } as never);
    const sub = nc.subscribe("forbidden.>");
    const denied = await c.sender("forbidden.x");
    expect(await send(denied, { body: "no" })).toMatchObject({
      state: "rejected",
      error: { condition: "amqp:unauthorized-access" },
    });
    const allowed = unique("allowed");
    const seen = nc.subscribe(allowed, { max: 1 });
    expect(await send(await c.sender(allowed), { body: "yes" })).toEqual({ state: "accepted" });
    for await (const m of seen) expect(m.string()).toContain("yes");
    await nc.flush();
    expect(sub.getReceived()).toBe(0);
    sub.unsubscribe();
    await c.close();
  });

  it("the verifying TLS listener offers EXTERNAL; the plain listener does not", async () => {
    const overTls = await saslExchange(() =>
      tlsConnect({
        port: gw.port("amqp_tls"),
        host: "127.0.0.1",
        ca: readFileSync(certs.ca),
        cert: readFileSync(certs.clientCert),
        key: readFileSync(certs.clientKey),
        servername: "localhost",
      }),
    );
    expect(overTls.mechanisms).toEqual(["PLAIN", "EXTERNAL"]);
    const plain = await saslExchange(() => tcpConnect(gw.port("amqp"), "127.0.0.1"));
    expect(plain.mechanisms).toEqual(["PLAIN"]);
  });

  it("EXTERNAL without a verified certificate: SASL outcome auth (rhea: amqp:unauthorized-access), then the socket is closed", async () => {
    // A client that picks EXTERNAL on the plain listener anyway.
    const answer = await saslExchange(() => tcpConnect(gw.port("amqp"), "127.0.0.1"), { mechanism: "EXTERNAL" });
    expect(answer.outcome).toBe(1); // sasl-code auth
    // A client that does not hang up is cut off (here limits.connect_timeout, 2 s).
    await answer.closed;
    // rhea reports the refusal as PLAIN's: amqp:unauthorized-access.
    await expect(AmqpClient.open(gw.port("amqp"), { sasl_mechanisms: externalOnly() } as never)).rejects.toMatchObject({
      condition: "amqp:unauthorized-access",
    });
    // Over TLS without a client certificate the handshake itself is refused.
    await expect(AmqpClient.open(gw.port("amqp_tls"), tls(false) as never)).rejects.toBeDefined();
  });

  it("an authorization identity other than the certificate's own is refused", async () => {
    const open = () =>
      tlsConnect({
        port: gw.port("amqp_tls"),
        host: "127.0.0.1",
        ca: readFileSync(certs.ca),
        cert: readFileSync(certs.clientCert),
        key: readFileSync(certs.clientKey),
        servername: "localhost",
      });
    const other = await saslExchange(open, { mechanism: "EXTERNAL", initial_response: Buffer.from("device-2") });
    expect(other.outcome).toBe(1);
    const own = await saslExchange(open, { mechanism: "EXTERNAL", initial_response: Buffer.from("device-1") });
    expect(own.outcome).toBe(0);
    await Promise.all([other.closed, own.closed]);
  });

  it("Qpid Proton (python3-qpid-proton) with a client certificate and EXTERNAL; without one, refused", async () => {
    const subject = unique("proton.cert");
    const sub = nc.subscribe(subject, { max: 1 });
    await nc.flush();
    const url = `amqps://localhost:${gw.port("amqp_tls")}`;
    const tlsArgs = ["--ca", certs.ca, "--mech", "EXTERNAL"];
    const sent = proton([
      url,
      subject,
      "--data",
      "from proton",
      ...tlsArgs,
      "--cert",
      certs.clientCert,
      "--key",
      certs.clientKey,
    ]);
    expect(sent[0]).toEqual({ outcome: "accepted" });
    for await (const m of sub) expect(m.string()).toBe("from proton");
    const denied = proton([
      url,
      "forbidden.proton",
      "--data",
      "x",
      ...tlsArgs,
      "--cert",
      certs.clientCert,
      "--key",
      certs.clientKey,
    ]);
    expect(denied[0]).toMatchObject({ outcome: "rejected", condition: "amqp:unauthorized-access" });
    // No certificate: the TLS handshake is refused before any SASL.
    const refused = proton([url, subject, "--data", "x", ...tlsArgs]);
    expect(refused[0]).toHaveProperty("transport_error");
  });

  it("EXTERNAL not in amqp.sasl: not offered, even with a verified certificate", async () => {
    const offered = await saslExchange(() =>
      tlsConnect({
        port: without.port("amqp_tls"),
        host: "127.0.0.1",
        ca: readFileSync(certs.ca),
        cert: readFileSync(certs.clientCert),
        key: readFileSync(certs.clientKey),
        servername: "localhost",
      }),
    );
    expect(offered.mechanisms).toEqual(["PLAIN", "ANONYMOUS"]);
    await expect(
      AmqpClient.open(without.port("amqp_tls"), { ...tls(true), enable_sasl_external: true } as never),
    ).rejects.toThrow(/No suitable mechanism; server supports PLAIN,ANONYMOUS/);
    // PLAIN still works there, the certificate only opening the door.
    const c = await AmqpClient.open(without.port("amqp_tls"), {
      ...tls(true),
      username: "sensor",
      password: "sensor-pw",
    } as never);
    await c.close();
  });
});

describe("SASL EXTERNAL, the pure parts", () => {
  it("the certificate's name: CN, else the first DNS, email or URI subject alternative name", () => {
    expect(certificateName({ subject: { CN: "device-1", O: "plant" } })).toBe("device-1");
    expect(certificateName({ subject: { CN: ["a", "b"] } })).toBe("a");
    expect(certificateName({ subject: { O: "plant" }, subjectaltname: "IP Address:10.0.0.1, DNS:dev.example" })).toBe(
      "dev.example",
    );
    expect(certificateName({ subject: {}, subjectaltname: "email:d@example.com" })).toBe("d@example.com");
    expect(certificateName({ subject: {} })).toBeUndefined();
  });

  it("the login: no NATS credentials, the certificate's name as username; nothing without a certificate", () => {
    expect(externalLogin("device-1")(undefined)).toEqual({
      credentials: {},
      username: "device-1",
      mechanism: "EXTERNAL",
    });
    expect(externalLogin("device-1")(Buffer.from("device-1"))).toMatchObject({ username: "device-1" });
    expect(externalLogin("device-1")(Buffer.from("someone-else"))).toBeUndefined();
    expect(externalLogin(undefined)(undefined)).toBeUndefined();
  });

  it("offered mechanisms: EXTERNAL only with a certificate; never an empty list (rhea would offer ANONYMOUS)", () => {
    const auth = async () => true;
    expect(Object.keys(saslMechanisms(["PLAIN", "EXTERNAL"], auth))).toEqual(["PLAIN"]);
    expect(Object.keys(saslMechanisms(["PLAIN", "EXTERNAL"], auth, "device-1"))).toEqual(["PLAIN", "EXTERNAL"]);
    expect(Object.keys(saslMechanisms(["EXTERNAL", "PLAIN"], auth, "device-1"))).toEqual(["EXTERNAL", "PLAIN"]);
    const lone = saslMechanisms(["EXTERNAL"], auth);
    expect(Object.keys(lone)).toEqual(["EXTERNAL"]);
  });

  it("a lone EXTERNAL on a socket without a certificate refuses whoever picks it", async () => {
    let asked = false;
    const m = saslMechanisms(["EXTERNAL"], async () => {
      asked = true;
      return true;
    }).EXTERNAL!();
    await m.start(undefined);
    expect(m.outcome).toBe(false);
    expect(asked).toBe(false);
  });
});

/** rhea's client-side EXTERNAL alone, for a socket rhea would not enable it on. */
function externalOnly(): unknown {
  const sasl = (
    createRequire(import.meta.url)("rhea/lib/sasl.js") as { client_mechanisms(): { enable_external(): void } }
  ).client_mechanisms();
  sasl.enable_external();
  return sasl;
}

/** send.py (Debian's Qpid Proton) run to the end; its JSON lines. */
function proton(args: string[]): Array<Record<string, unknown>> {
  const out = execFileSync("/usr/bin/python3", [join(import.meta.dirname, "clients/send.py"), ...args], {
    encoding: "utf8",
    timeout: 15_000,
  });
  return out
    .trim()
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
