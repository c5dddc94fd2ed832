// A real nats-server with accounts (admin, two client accounts, system) and two gateways
// on it, as admin-subjects.md's "Done when" describes; the admin tests run against it with
// hand-written permissions (api.test.ts) and with the generated ones (permissions.test.ts).
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";

/** The secrets the gateways read through "env:" references, and the hand-written server gets literally. */
export const SECRETS = {
  MQG_ADMIN_PASSWORD: "admin-pw",
  MQG_OPERATOR_PASSWORD: "operator-pw",
  MQG_A_PASSWORD: "gateway-a-pw",
  MQG_B_PASSWORD: "gateway-b-pw",
} as const;

/**
 * What both gateways share, as one config file for a fleet started with --id each.
 * PLANT_A's clients get their account from NATS ($SYS.REQ.USER.INFO), PLANT_B's from the
 * routing table.
 */
export const FLEET_CONFIG = {
  admin: { user: "mqg-admin", password: "env:MQG_ADMIN_PASSWORD" },
  gateway_users: {
    PLANT_A: { user: "mqg-a", password: "env:MQG_A_PASSWORD" },
    PLANT_B: { user: "mqg-b", password: "env:MQG_B_PASSWORD" },
  },
  routing: [{ username: "sensor-b*", account: "PLANT_B" }],
  ldm: { duration: "1s" },
};

/**
 * Client users of each account, and "anon-a", which unauthenticated connections become.
 * Only the gateway's core connection uses it (src/gateway/layers/nats.ts connects it without credentials), so
 * it gets what a gateway user gets rather than a client's default permissions.
 */
export const CLIENT_USERS = {
  PLANT_A: `{ user: "sensor-a", password: "sensor-a-pw" }, { user: "anon-a", password: "anon-a-pw", permissions: { publish: ">", subscribe: ">" } }`,
  PLANT_B: `{ user: "sensor-b", password: "sensor-b-pw" }`,
};

/** Adds the system account, and the user anonymous connections become, to a server config. */
export function withSystemAccount(serverConfig: string): string {
  return `${serverConfig.replace(/^accounts \{$/m, `accounts {\n  SYS { users: [ { user: "sys", password: "sys-pw" } ] }`)}
system_account: SYS
no_auth_user: "anon-a"
`;
}

/** Hand-written permissions that grant exactly what admin-subjects.md's "NATS permissions" lists. */
export const HAND_WRITTEN_SERVER = withSystemAccount(`
accounts {
  MQG_ADMIN {
    users: [
      { user: "mqg-admin", password: "${SECRETS.MQG_ADMIN_PASSWORD}",
        permissions: { publish: ["$SYS.REQ.USER.INFO"], subscribe: ["$MQG.admin.server.*.>", "$MQG.admin.ping.>", "$MQG.admin.account.*.>", "_INBOX.>"], allow_responses: true } }
      { user: "mqg-operator", password: "${SECRETS.MQG_OPERATOR_PASSWORD}",
        permissions: { publish: ["$MQG.admin.>"], subscribe: ["_INBOX.>"] } }
    ]
  }
  PLANT_A { jetstream: enabled, users: [ { user: "mqg-a", password: "${SECRETS.MQG_A_PASSWORD}" }, ${CLIENT_USERS.PLANT_A} ] }
  PLANT_B { jetstream: enabled, users: [ { user: "mqg-b", password: "${SECRETS.MQG_B_PASSWORD}" }, ${CLIENT_USERS.PLANT_B} ] }
}
`);

export interface World {
  readonly nats: NatsServerHandle;
  readonly gwA: GatewayHandle;
  readonly gwB: GatewayHandle;
  readonly operator: NatsConnection;
  /** A NATS connection as the given user (closed with the world). */
  as(user: string, password: string, inboxPrefix?: string): Promise<NatsConnection>;
  close(): Promise<void>;
}

export async function startWorld(serverConfig: string): Promise<World> {
  const nats = await startNatsServer({ config: serverConfig });
  const env = { ...SECRETS };
  const [gwA, gwB] = await Promise.all(
    ["gw-a", "gw-b"].map((id) => startGateway({ nats: nats.url, config: FLEET_CONFIG, args: ["--id", id], env })),
  );
  const conns: NatsConnection[] = [];
  const as = async (user: string, pass: string, inboxPrefix?: string) => {
    const nc = await connect({ servers: nats.url, user, pass, ...(inboxPrefix ? { inboxPrefix } : {}) });
    conns.push(nc);
    return nc;
  };
  const operator = await as("mqg-operator", SECRETS.MQG_OPERATOR_PASSWORD);
  // Both admin connections must be serving before the first request.
  await Promise.all(
    [gwA, gwB].map((gw) => gw!.waitForLog((l) => l.msg === "admin connection serving the admin subjects")),
  );
  return {
    nats,
    gwA: gwA!,
    gwB: gwB!,
    operator,
    as,
    close: async () => {
      await Promise.all(conns.map((nc) => nc.close().catch(() => undefined)));
      await Promise.all([gwA?.stop(), gwB?.stop()]);
      await nats.stop();
    },
  };
}

export type Reply = Record<string, unknown>;

/** `nats req ... --replies 0`: every reply that arrives within `maxWaitMs`, sorted by gateway id. */
export async function ask(nc: NatsConnection, subject: string, body = "", maxWaitMs = 300): Promise<Reply[]> {
  const replies: Reply[] = [];
  try {
    for await (const m of await nc.requestMany(subject, body, { strategy: "timer", maxWait: maxWaitMs })) {
      replies.push(m.json<Reply>());
    }
  } catch (e) {
    // Nobody subscribed: no reply, which is what the caller checks.
    if (!/no responders/i.test((e as Error).message)) throw e;
  }
  return replies.sort((a, b) => String(a.id).localeCompare(String(b.id)));
}

export async function healthz(gw: GatewayHandle): Promise<{ status: number; body: Reply }> {
  const res = await fetch(`http://127.0.0.1:${gw.port("http")}/healthz`);
  return { status: res.status, body: (await res.json()) as Reply };
}
