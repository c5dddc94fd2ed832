// admin-subjects.md "Not served": without admin credentials, with an admin user NATS
// refuses, or with a subscription NATS refuses, the gateway warns and keeps serving
// clients; liveness does not depend on the admin connection. And a gateway without
// gateway users serves an account's scope exactly while it has clients there.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { IDisconnectPacket } from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { ask, healthz, SECRETS, withSystemAccount } from "./world.js";

const SERVER = withSystemAccount(`
accounts {
  MQG_ADMIN {
    users: [
      { user: "mqg-admin", password: "${SECRETS.MQG_ADMIN_PASSWORD}" }
      { user: "narrow-admin", password: "narrow-pw",
        permissions: { publish: ["$SYS.REQ.USER.INFO"], subscribe: ["$MQG.admin.server.*.>", "$MQG.admin.ping.>", "_INBOX.>"], allow_responses: true } }
      { user: "mqg-operator", password: "${SECRETS.MQG_OPERATOR_PASSWORD}" }
    ]
  }
  PLANT_A {
    jetstream: enabled
    users: [
      { user: "mqg-a", password: "${SECRETS.MQG_A_PASSWORD}" }
      { user: "sensor-a", password: "sensor-a-pw" }
      { user: "anon-a", password: "anon-a-pw" }
    ]
  }
}
`);

const GATEWAY_USERS = { PLANT_A: { user: "mqg-a", password: SECRETS.MQG_A_PASSWORD } };
const SENSOR = { username: "sensor-a", password: Buffer.from("sensor-a-pw") };

describe("when admin requests are not served", () => {
  let nats: NatsServerHandle;
  let refused: GatewayHandle;
  let off: GatewayHandle;
  let narrow: GatewayHandle;
  let dynamic: GatewayHandle;
  let operator: NatsConnection;
  let gatewayUser: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ config: SERVER });
    const gateway = (id: string, extra: Record<string, unknown>) =>
      startGateway({ nats: nats.url, config: { id, ...extra } });
    [refused, off, narrow, dynamic] = await Promise.all([
      gateway("gw-refused", { admin: { user: "mqg-admin", password: "wrong" }, gateway_users: GATEWAY_USERS }),
      gateway("gw-off", { gateway_users: GATEWAY_USERS }),
      gateway("gw-narrow", { admin: { user: "narrow-admin", password: "narrow-pw" }, gateway_users: GATEWAY_USERS }),
      gateway("gw-dynamic", { admin: { user: "mqg-admin", password: SECRETS.MQG_ADMIN_PASSWORD } }),
    ]);
    operator = await connect({ servers: nats.url, user: "mqg-operator", pass: SECRETS.MQG_OPERATOR_PASSWORD });
    gatewayUser = await connect({ servers: nats.url, user: "mqg-a", pass: SECRETS.MQG_A_PASSWORD });
    await Promise.all(
      [narrow, dynamic].map((gw) => gw.waitForLog((l) => l.msg === "admin connection serving the admin subjects")),
    );
  });
  afterAll(async () => {
    await operator?.close();
    await gatewayUser?.close();
    await Promise.all([refused, off, narrow, dynamic].map((gw) => gw?.stop()));
    await nats?.stop();
  });

  it("an admin user NATS refuses: a warning, /healthz says null, clients and liveness are served", async () => {
    const warning = await refused.waitForLog(
      (l) => l.level === 40 && /NATS refused the admin user/.test(String(l.msg)),
    );
    expect(String(warning.reason)).toMatch(/authoriz/i);
    // The refused user is named, its password never (issue 25).
    expect(warning.credentials).toBe('user "mqg-admin" with a password');
    expect(refused.logs.filter((l) => JSON.stringify(l).includes('"wrong"'))).toEqual([]);
    const h = await healthz(refused);
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ status: "ok", admin_account: null });
    // Between refusals it retries: a moment in `connecting`, never `serving`.
    expect(["refused", "connecting"]).toContain(h.body.admin);
    const client = await RawMqtt.connected(refused.port("mqtt"), 5, SENSOR);
    client.send({ cmd: "pingreq" });
    await client.next("pingresp");
    client.end();
    const alive = await gatewayUser.request(`$MQG.alive.${refused.id}`, "", { timeout: 2_000 });
    expect(alive.json()).toMatchObject({ id: refused.id, alive: true });
    expect((await ask(operator, "$MQG.admin.ping.info")).map((r) => r.id)).not.toContain(refused.id);
  });

  it("no admin credentials: no admin subscriber at all, /healthz says null", async () => {
    await off.waitForLog((l) => /admin API is off/.test(String(l.msg)));
    expect((await healthz(off)).body).toMatchObject({ status: "ok", admin_account: null, admin: "off" });
    expect(await ask(operator, `$MQG.admin.server.${off.id}.info`)).toEqual([]);
    expect((await ask(operator, "$MQG.admin.ping.info")).map((r) => r.id)).not.toContain(off.id);
  });

  it("a refused subscription: a warning naming it, the other scopes still served", async () => {
    const warning = await narrow.waitForLog(
      (l) => l.level === 40 && String(l.msg).includes("$MQG.admin.account.PLANT_A.>"),
    );
    expect(String(warning.msg)).toMatch(/NATS refused the admin subscription/);
    expect(await ask(operator, `$MQG.admin.server.${narrow.id}.info`)).toEqual([
      expect.objectContaining({ id: narrow.id, accounts: { PLANT_A: { mqtt: 0, amqp: 0 } } }),
    ]);
    expect((await healthz(narrow)).body).toMatchObject({ admin_account: "MQG_ADMIN", admin: "serving" });
  });

  it("a gateway serves an account's scope while it has clients there, and not before or after", async () => {
    const scope = "$MQG.admin.account.PLANT_A.info";
    const dynamicReplies = async () => (await ask(operator, scope)).filter((r) => r.id === dynamic.id);
    expect(await dynamicReplies()).toEqual([]);
    const client = await RawMqtt.connected(dynamic.port("mqtt"), 4, SENSOR);
    const [reply] = await eventually(
      async () => {
        const r = await dynamicReplies();
        return r.length > 0 ? r : undefined;
      },
      5_000,
      "the PLANT_A scope served",
    );
    expect(reply).toMatchObject({ accounts: { PLANT_A: { mqtt: 1, amqp: 0 } } });
    client.send({ cmd: "disconnect" } as IDisconnectPacket);
    await client.waitClosed();
    await eventually(async () => ((await dynamicReplies()).length === 0 ? true : undefined), 5_000, "the scope left");
  });
});
