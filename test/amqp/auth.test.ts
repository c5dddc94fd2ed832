// Issue 4, item 1 and the CONTRACT's identity rules: SASL PLAIN and ANONYMOUS become the
// client's own NATS connection, NATS decides, and its refusals reach AMQP clients as
// amqp:unauthorized-access. Kick and lame duck close with amqp:connection:forced.
// Runs on the admin tests' world: a nats-server with accounts and two gateways.
import { execFileSync } from "node:child_process";
import { connect as tcpConnect } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ask, HAND_WRITTEN_SERVER, startWorld, type World } from "../admin/world.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, collect, send, sendSettled } from "./rheaClient.js";

const SENSOR = `{ user: "sensor-a", password: "sensor-a-pw" }`;
const LIMITED = `{ user: "amqp-limited", password: "limited-pw", permissions: { publish: { deny: ["forbidden.>"] }, subscribe: { deny: ["forbidden.>"] } } }`;

function serverWithLimitedUser(): string {
  if (!HAND_WRITTEN_SERVER.includes(SENSOR))
    throw new Error("the admin world's server config changed: update auth.test.ts");
  return HAND_WRITTEN_SERVER.replace(SENSOR, `${SENSOR}, ${LIMITED}`);
}

async function metric(gw: GatewayHandle, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${gw.port("http")}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text
    .split("\n")
    .filter((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

describe("AMQP logins and NATS authorization", () => {
  let world: World;

  beforeAll(async () => {
    world = await startWorld(serverWithLimitedUser());
  });
  afterAll(async () => {
    await world?.close();
  });

  it("SASL PLAIN: the user's own NATS connection; listed with protocol amqp and its container-id", async () => {
    const c = await AmqpClient.open(world.gwA.port("amqp"), {
      username: "sensor-a",
      password: "sensor-a-pw",
      container_id: "plain-client",
    });
    const [listed] = await ask(
      world.operator,
      `$MQG.admin.server.${world.gwA.id}.list`,
      JSON.stringify({ account: "PLANT_A" }),
    );
    const entry = (listed!.clients as Array<Record<string, unknown>>).find((x) => x.client_id === "plain-client");
    expect(entry).toMatchObject({ protocol: "amqp", client_id: "plain-client", account: "PLANT_A" });
    expect(String(entry!.remote)).toMatch(/^127\.0\.0\.1:\d+$/);
    await c.close();
  });

  it("a login NATS refuses gets amqp:unauthorized-access (rhea and Qpid Proton)", async () => {
    await expect(
      AmqpClient.open(world.gwA.port("amqp"), { username: "sensor-a", password: "wrong" }),
    ).rejects.toMatchObject({
      condition: "amqp:unauthorized-access",
    });
    const proton = execFileSync(
      "/usr/bin/python3",
      [
        join(import.meta.dirname, "clients/send.py"),
        `amqp://127.0.0.1:${world.gwA.port("amqp")}`,
        "x",
        "--data",
        "x",
        "--user",
        "sensor-a",
        "--password",
        "wrong",
      ],
      { encoding: "utf8", timeout: 15_000 },
    );
    expect(JSON.parse(proton.trim().split("\n")[0]!)).toMatchObject({ transport_error: "amqp:unauthorized-access" });
  });

  it.each([
    ["SASL ANONYMOUS", { username: "just-a-trace-string" }],
    ["no SASL layer at all", {}],
  ])("%s is a NATS connection without credentials (here the server's no_auth_user)", async (_how, options) => {
    const c = await AmqpClient.open(world.gwA.port("amqp"), options);
    const subject = unique("anon");
    const got = collect(await c.receiver(subject));
    const nc = await world.as("anon-a", "anon-a-pw");
    nc.publish(subject, "hello anonymous");
    await got.next();
    await c.close();
  });

  describe("permissions (CONTRACT: NATS permission denied)", () => {
    let c: AmqpClient;
    beforeAll(async () => {
      c = await AmqpClient.open(world.gwA.port("amqp"), { username: "amqp-limited", password: "limited-pw" });
    });
    afterAll(async () => {
      await c?.close();
    });

    it("an unsettled send NATS refuses is rejected amqp:unauthorized-access; allowed sends go on", async () => {
      const denied = await c.sender("forbidden.x");
      expect(await send(denied, { body: "no" })).toMatchObject({
        state: "rejected",
        error: { condition: "amqp:unauthorized-access" },
      });
      const relay = await c.sender({ target: {} });
      expect(await send(relay, { to: "forbidden.y", body: "no" })).toMatchObject({
        state: "rejected",
        error: { condition: "amqp:unauthorized-access" },
      });
      expect(await send(relay, { to: unique("allowed"), body: "yes" })).toEqual({ state: "accepted" });
    });

    it("a presettled send NATS refuses is dropped and counted", async () => {
      const before = await metric(world.gwA, "mqgw_dropped_total", { protocol: "amqp", reason: "not_authorized" });
      const s = await c.sender({ target: { address: "forbidden.z" }, snd_settle_mode: 1 });
      await sendSettled(s, { body: "dropped" });
      await eventually(
        async () =>
          (await metric(world.gwA, "mqgw_dropped_total", { protocol: "amqp", reason: "not_authorized" })) > before
            ? true
            : undefined,
        5_000,
        "the drop counted",
      );
    });

    it("a receiver NATS will not let subscribe is refused amqp:unauthorized-access", async () => {
      expect(await c.refused("receiver", "forbidden.r")).toMatchObject({ condition: "amqp:unauthorized-access" });
    });
  });

  it("kick: the client is closed with amqp:connection:forced", async () => {
    const c = await AmqpClient.open(world.gwA.port("amqp"), {
      username: "sensor-a",
      password: "sensor-a-pw",
      container_id: "to-be-kicked",
    });
    const closed = c.closed();
    const replies = await ask(
      world.operator,
      "$MQG.admin.account.PLANT_A.kick",
      JSON.stringify({ client_id: "to-be-kicked" }),
      500,
    );
    expect(replies.some((r) => r.kicked === true)).toBe(true);
    expect(await closed).toMatchObject({ condition: "amqp:connection:forced" });
  });

  describe("SASL as configured", () => {
    let plainOnly: GatewayHandle;
    beforeAll(async () => {
      plainOnly = await startGateway({
        nats: world.nats.url,
        config: { amqp: { listen: "127.0.0.1:0", sasl: ["PLAIN"] } },
      });
    });
    afterAll(async () => {
      await plainOnly?.stop();
    });

    it("without ANONYMOUS, a client skipping SASL is answered with the SASL header and closed", async () => {
      const socket = tcpConnect(plainOnly.port("amqp"), "127.0.0.1");
      let answer = Buffer.alloc(0);
      socket.on("data", (d) => {
        answer = Buffer.concat([answer, d]);
      });
      socket.write(Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 1, 0, 0]));
      await new Promise((r) => socket.once("close", r));
      expect(answer.subarray(0, 8)).toEqual(Buffer.from([0x41, 0x4d, 0x51, 0x50, 3, 1, 0, 0]));
    });

    it("offers only the configured mechanisms; PLAIN works", async () => {
      // rhea logs in with SASL ANONYMOUS when given a username and no password.
      await expect(AmqpClient.open(plainOnly.port("amqp"), { username: "anonymous-only" })).rejects.toThrow(
        /mechanism/i,
      );
      const c = await AmqpClient.open(plainOnly.port("amqp"), { username: "sensor-a", password: "sensor-a-pw" });
      await c.close();
    });
  });

  it("lame duck: clients are closed with amqp:connection:forced", async () => {
    const c = await AmqpClient.open(world.gwB.port("amqp"), { username: "sensor-a", password: "sensor-a-pw" });
    const closed = c.closed(15_000);
    world.gwB.process.kill("SIGUSR2");
    expect(await closed).toMatchObject({ condition: "amqp:connection:forced" });
  });
});
