// nats.tls: the gateway reaches a nats-server that speaks TLS only, trusting the CA the
// config names, for its own connection, the clients' connections and the admin connection.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { makeCertificates } from "../helpers/tls.js";

let nats: NatsServerHandle;
let certs: ReturnType<typeof makeCertificates>;

beforeAll(async () => {
  certs = makeCertificates();
  nats = await startNatsServer({
    config: `
tls { cert_file: "${certs.cert}", key_file: "${certs.key}", timeout: 10 }
accounts {
  ADMIN { users: [ { user: "mqg-admin", password: "admin-pw" } ] }
  APP { jetstream: enabled, users: [ { user: "app" } ] }
}
no_auth_user: "app"
`,
  });
});
afterAll(async () => {
  await nats?.stop();
});

describe("nats.tls", () => {
  it("with the CA: clients' messages flow over TLS, and the admin connection serves", async () => {
    const gw = await startGateway({
      nats: `tls://127.0.0.1:${nats.port}`,
      config: { nats: { tls: { ca_file: certs.ca } }, admin: { user: "mqg-admin", password: "admin-pw" } },
    });
    try {
      await gw.waitForLog((l) => l.msg === "admin connection serving the admin subjects");
      const sub = await connectMqtt(gw.port("mqtt"), { clientId: "tls-sub" });
      const got = collect(sub);
      await sub.subscribeAsync("secure/#", { qos: 1 });
      const pub = await connectMqtt(gw.port("mqtt"), { clientId: "tls-pub" });
      await pub.publishAsync("secure/a", "over tls", { qos: 1 });
      expect((await got.count(1))[0]!.payload.toString()).toBe("over tls");
      sub.end(true);
      pub.end(true);
    } finally {
      await gw.stop();
    }
  });

  it("without it: the server's certificate is not trusted, one plain line, exit 2", async () => {
    const err = await startGateway({ nats: `tls://127.0.0.1:${nats.port}` }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/exited with 2/);
    expect(err?.message).toMatch(new RegExp(`mq-gateway: cannot reach NATS at tls://127\\.0\\.0\\.1:${nats.port}: `));
  });
});
