import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LoadResult, loadConfig } from "../../src/config/load.js";
import type { GatewayConfig } from "../../src/config/schema.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mqgw-config-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

function config(result: LoadResult): GatewayConfig {
  if (!result.ok) throw new Error(`expected a config, got problems:\n${result.problems.join("\n")}`);
  return result.config;
}

function problems(result: LoadResult): string[] {
  if (result.ok) throw new Error("expected problems, got a config");
  return result.problems;
}

describe("defaults", () => {
  it("client listeners: loopback with the embedded nats-server, all interfaces once nats.servers is set", async () => {
    const embedded = config(await loadConfig({ flags: {} }));
    expect([embedded.mqtt.listen, embedded.amqp.listen]).toEqual([
      { host: "127.0.0.1", port: 1883 },
      { host: "127.0.0.1", port: 5672 },
    ]);
    const external = config(await loadConfig({ flags: { nats: "nats://10.0.0.5:4222" } }));
    expect([external.mqtt.listen, external.amqp.listen]).toEqual([
      { host: "0.0.0.0", port: 1883 },
      { host: "0.0.0.0", port: 5672 },
    ]);
    const pem = await file("lo.pem", "x");
    const tls = config(
      await loadConfig({
        file: await file("lo.yaml", `mqtt:\n  tls: { cert_file: ${pem}, key_file: ${pem} }\n`),
        flags: { nats: "nats://h:4222" },
      }),
    );
    expect(tls.mqtt.tls?.listen).toEqual({ host: "0.0.0.0", port: 8883 });
    // What the operator wrote stays, embedded or not; so does a listener turned off.
    const written = config(
      await loadConfig({ file: await file("open.yaml", `mqtt: { listen: "0.0.0.0:1883" }\namqp: { listen: "" }\n`) }),
    );
    expect([written.mqtt.listen, written.amqp.listen]).toEqual([{ host: "0.0.0.0", port: 1883 }, null]);
  });

  it("--nats-listen moves the embedded nats-server", async () => {
    const c = config(await loadConfig({ flags: { natsListen: "127.0.0.1:14222" } }));
    expect(c.nats.embedded_listen).toEqual({ host: "127.0.0.1", port: 14222 });
    expect(problems(await loadConfig({ flags: { natsListen: "nowhere" } }))).toEqual([
      expect.stringMatching(/^nats\.embedded_listen \(from --nats-listen\): "nowhere" is not HOST:PORT/),
    ]);
  });

  it("an absent file gives every default of the CONTRACT", async () => {
    const c = config(await loadConfig({ flags: {} }));
    expect(c.id).toMatch(/^[0-9a-f]{16}$/);
    expect(c.source.id_generated).toBe(true);
    expect(c.nats).toEqual({
      servers: [],
      tls: null,
      embedded_listen: { host: "127.0.0.1", port: 4222 },
      embedded_max_payload: 8 * 1024 * 1024,
      max_control_line: 4096,
    });
    expect(c.admin).toBeNull();
    expect(c.gateway_users).toEqual({});
    // With the embedded nats-server (no auth) the client listeners default to loopback.
    expect(c.mqtt).toEqual({
      listen: { host: "127.0.0.1", port: 1883 },
      websocket: null,
      tls: null,
      routes: [],
      sessions_bucket: "MQGW_SESSIONS",
      retained_stream: "MQGW_RETAINED",
      max_packet_size: 1024 * 1024,
      receive_maximum: 256,
      max_keepalive: 120_000,
      session_expiry_max: 7 * 86_400_000,
      session_sweep_interval: 300_000,
      client_id_header: "always",
      maximum_qos: 2,
      retain_available: true,
      wildcard_subscription_available: true,
      shared_subscription_available: true,
      messages_stream: "MQGW_MSGS",
      messages_max_bytes: -1,
      messages_max_age: 0,
      stream_replicas: null,
    });
    expect(c.amqp).toEqual({
      listen: { host: "127.0.0.1", port: 5672 },
      tls: null,
      routes: [],
      max_frame_size: 65_536,
      sasl: ["PLAIN", "ANONYMOUS"],
      idle_timeout: 60_000,
      dedupe_message_id: false,
    });
    expect(c.bindings).toEqual([]);
    expect(c.routing).toEqual([]);
    expect(c.ldm).toEqual({ duration: 30_000 });
    expect(c.http).toEqual({ listen: { host: "127.0.0.1", port: 8080 } });
    expect(c.log).toEqual({ level: "info", format: "json" });
    expect(c.limits).toEqual({
      max_connections: 100_000,
      max_connections_per_account: 0,
      max_subscriptions_per_client: 1000,
      max_topic_levels: 128,
      connect_timeout: 10_000,
      max_connect_buffer: 16 * 1024 * 1024,
      max_client_buffer: 4 * 1024 * 1024,
      write_deadline: 10_000,
      per_client: { messages_rate: 0, messages_burst: 0, bytes_rate: 0, bytes_burst: 0 },
      per_account: { messages_rate: 0, messages_burst: 0, bytes_rate: 0, bytes_burst: 0 },
    });
    expect(c.data).toBe(join(process.cwd(), "data"));
  });

  it("an empty file, or sections left empty, are all defaults", async () => {
    const empty = config(await loadConfig({ file: await file("empty.yaml", "") }));
    const sections = config(await loadConfig({ file: await file("sections.yaml", "mqtt:\namqp:\nlimits:\n") }));
    const { id: _a, source: _s, ...rest } = empty;
    const { id: _b, source: _t, ...restSections } = sections;
    expect(restSections).toEqual(rest);
    expect(rest.mqtt.receive_maximum).toBe(256);
  });

  it("draws a new id on each load unless one is set", async () => {
    const a = config(await loadConfig({}));
    const b = config(await loadConfig({}));
    expect(a.id).not.toBe(b.id);
    const c = config(await loadConfig({ file: await file("id.yaml", "id: gw-eu-1\n") }));
    expect(c.id).toBe("gw-eu-1");
    expect(c.source.id_generated).toBe(false);
  });
});

describe("a full config", () => {
  it("parses the CONTRACT's example (YAML) into normalized values", async () => {
    await writeFile(join(dir, "mqg.secret"), "s3cret\n");
    const path = await file(
      "full.yaml",
      `id: gw-eu-1
nats:
  servers: [nats://127.0.0.1:4222, nats://127.0.0.1:4223]
admin:
  user: mqg-admin
  password: "file:${join(dir, "mqg.secret")}"
gateway_users:
  PLANT_A: { user: mqg, password: "env:MQG_PW" }
  PLANT_B: { token: "literal-token" }
mqtt:
  listen: 0.0.0.0:1883
  websocket: 0.0.0.0:8083
  routes:
    - { subject: orders, template: "orders.{region}" }
  sessions_bucket: MQGW_SESSIONS
  retained_stream: MQGW_RETAINED
  max_packet_size: 1MiB
  receive_maximum: 256
  max_keepalive: 120s
  session_expiry_max: 7d
amqp:
  listen: ""
  routes: [ { subject: orders, template: "orders.{region}" } ]
  max_frame_size: 64KiB
  sasl: [PLAIN]
bindings:
  - { stream: ORDERS, account: PLANT_A }
routing:
  - { username: "plant-a-*", account: PLANT_A }
ldm: { duration: 1m30s }
http:
  listen: 127.0.0.1:8080
log: { level: debug, format: pretty }
limits: { max_connections: 100000, max_connections_per_account: 0 }
`,
    );
    const c = config(await loadConfig({ file: path, env: { MQG_PW: "pw" } }));
    expect(c.id).toBe("gw-eu-1");
    expect(c.nats.servers).toEqual(["nats://127.0.0.1:4222", "nats://127.0.0.1:4223"]);
    // Secrets stay references: resolved when connecting, never held in the config.
    expect(c.admin).toEqual({ kind: "user", user: "mqg-admin", password: `file:${join(dir, "mqg.secret")}` });
    expect(c.gateway_users).toEqual({
      PLANT_A: { kind: "user", user: "mqg", password: "env:MQG_PW" },
      PLANT_B: { kind: "token", token: "literal-token" },
    });
    expect(c.mqtt.websocket).toEqual({ host: "0.0.0.0", port: 8083 });
    expect(c.mqtt.routes).toEqual([{ subject: "orders", template: "orders.{region}" }]);
    expect(c.amqp.listen).toBeNull();
    expect(c.amqp.sasl).toEqual(["PLAIN"]);
    expect(c.bindings).toEqual([{ stream: "ORDERS", account: "PLANT_A" }]);
    expect(c.routing).toEqual([{ username: "plant-a-*", account: "PLANT_A" }]);
    expect(c.ldm.duration).toBe(90_000);
    expect(c.log).toEqual({ level: "debug", format: "pretty" });
  });

  it("reads JSON by extension and by content", async () => {
    const json = JSON.stringify({ id: "gw-json", mqtt: { max_packet_size: "64KiB" } });
    expect(config(await loadConfig({ file: await file("c.json", json) })).mqtt.max_packet_size).toBe(65_536);
    expect(config(await loadConfig({ file: await file("c.conf", json) })).id).toBe("gw-json");
    expect(problems(await loadConfig({ file: await file("bad.json", "{ id: ") }))[0]).toMatch(
      /bad\.json: not valid JSON/,
    );
  });

  it("takes TLS sections with their own listen defaults", async () => {
    const pem = await file("x.pem", "not really a certificate");
    const c = config(
      await loadConfig({
        file: await file(
          "tls.yaml",
          `mqtt:\n  tls: { cert_file: ${pem}, key_file: ${pem} }\namqp:\n  tls: { listen: ":5999", cert_file: ${pem}, key_file: ${pem}, verify_clients: true, ca_file: ${pem} }\n`,
        ),
      }),
    );
    expect(c.mqtt.tls).toEqual({
      listen: { host: "127.0.0.1", port: 8883 },
      cert_file: pem,
      key_file: pem,
      verify_clients: false,
    });
    expect(c.amqp.tls).toEqual({
      listen: { host: "0.0.0.0", port: 5999 },
      cert_file: pem,
      key_file: pem,
      ca_file: pem,
      verify_clients: true,
    });
  });
});

describe("problems", () => {
  it("lists three different mistakes, each under its own path", async () => {
    const path = await file(
      "three.yaml",
      `mqtt:
  max_packet_size: 3 parsecs
  routes:
    - { subject: orders, template: "orders.{region}" }
    - { subject: invoices, template: invoices.region }
log: { level: verbose }
`,
    );
    const found = problems(await loadConfig({ file: path }));
    expect(found).toHaveLength(3);
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^mqtt\.max_packet_size: .*unknown unit "parsecs"/),
        "mqtt.routes[1].template: template has no {name} placeholder",
        expect.stringMatching(/^log\.level: expected one of trace, debug, info/),
      ]),
    );
  });

  it("refuses unknown keys at every level, suggesting the near one", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "unknown.yaml",
          "colour: red\nmqtt:\n  max_keep_alive: 120s\nlimits: { max_conections: 5 }\nmqtt_x: 1\n",
        ),
      }),
    );
    expect(found).toEqual(
      expect.arrayContaining([
        "colour: unknown key",
        "mqtt.max_keep_alive: unknown key (did you mean max_keepalive?)",
        "limits.max_conections: unknown key (did you mean max_connections?)",
        expect.stringMatching(/^mqtt_x: unknown key/),
      ]),
    );
    expect(found).toHaveLength(4);
  });

  it("refuses route templates that routing cannot use (its parser decides)", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "templates.yaml",
          `amqp:
  routes:
    - { subject: a, template: "a.b" }
    - { subject: b, template: "b.{" }
    - { subject: c, template: "c.{}" }
    - { subject: d, template: "d..{x}" }
    - { subject: e, template: "e.eu-{zone}" }
    - { subject: f.*, template: "f.{x}" }
`,
        ),
      }),
    );
    expect(found).toEqual([
      "amqp.routes[0].template: template has no {name} placeholder",
      expect.stringMatching(/^amqp\.routes\[1\]\.template: template has unbalanced braces/),
      expect.stringMatching(/^amqp\.routes\[2\]\.template: template has an empty placeholder/),
      expect.stringMatching(/^amqp\.routes\[3\]\.template: template has an empty token/),
      expect.stringMatching(/^amqp\.routes\[4\]\.template: .*a placeholder must be a whole token/),
      expect.stringMatching(/^amqp\.routes\[5\]\.subject: is not a subject without wildcards/),
    ]);
  });

  it("refuses duplicate route subjects within one protocol's list, not across them", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "dup.yaml",
          `mqtt:
  routes:
    - { subject: orders, template: "orders.{region}" }
    - { subject: orders, template: "orders.{country}" }
amqp:
  routes:
    - { subject: orders, template: "orders.{region}" }
`,
        ),
      }),
    );
    expect(found).toEqual(['mqtt.routes[1].subject: duplicate route subject "orders" (also mqtt.routes[0])']);
  });

  it("reports a duplicate route even when another route is wrong", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "dup2.yaml",
          `mqtt:\n  routes:\n    - { subject: a, template: "a.{x}" }\n    - { subject: a, template: "a.{y}" }\n    - { subject: b, template: nope }\n`,
        ),
      }),
    );
    expect(found).toHaveLength(2);
  });

  it("refuses bad durations, sizes, addresses and types, naming each path", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "values.yaml",
          `mqtt:
  max_keepalive: 120
  session_expiry_max: soon
  receive_maximum: 0
  listen: 1883
amqp:
  max_frame_size: 100
  sasl: []
ldm: { duration: "-1s" }
limits: { connect_timeout: 0s, max_connections: many }
`,
        ),
      }),
    );
    const paths = found.map((line) => line.slice(0, line.indexOf(":")));
    expect(paths.sort()).toEqual(
      [
        "amqp.max_frame_size",
        "amqp.sasl",
        "ldm.duration",
        "limits.connect_timeout",
        "limits.max_connections",
        "mqtt.listen",
        "mqtt.max_keepalive",
        "mqtt.receive_maximum",
        "mqtt.session_expiry_max",
      ].sort(),
    );
    expect(found).toContain('limits.max_connections: expected a number, got the string "many"');
  });

  it("amqp.sasl EXTERNAL: only with a TLS listener that verifies client certificates; not in the default", async () => {
    const pem = await file("some.pem", "not read by check");
    const tls = (verify: boolean) =>
      `amqp:\n  sasl: [PLAIN, EXTERNAL]\n  tls: { listen: "127.0.0.1:0", cert_file: ${pem}, key_file: ${pem}, ca_file: ${pem}, verify_clients: ${verify} }\n`;
    expect(config(await loadConfig({ file: await file("ext-ok.yaml", tls(true)) })).amqp.sasl).toEqual([
      "PLAIN",
      "EXTERNAL",
    ]);
    for (const [name, text] of [
      ["ext-noverify.yaml", tls(false)],
      ["ext-notls.yaml", "amqp: { sasl: [EXTERNAL] }\n"],
    ] as const) {
      expect(problems(await loadConfig({ file: await file(name, text) }))).toEqual([
        "amqp.sasl: EXTERNAL needs amqp.tls with verify_clients: true (it is the verified client certificate)",
      ]);
    }
    expect(config(await loadConfig({})).amqp.sasl).toEqual(["PLAIN", "ANONYMOUS"]);
  });

  it("amqp.idle_timeout: a duration from 1s to AMQP's uint of milliseconds", async () => {
    expect(
      config(await loadConfig({ file: await file("idle.yaml", "amqp: { idle_timeout: 15s }\n") })).amqp.idle_timeout,
    ).toBe(15_000);
    expect(
      problems(await loadConfig({ file: await file("idle-short.yaml", "amqp: { idle_timeout: 500ms }\n") })),
    ).toEqual(["amqp.idle_timeout: must be between 1s and 4294967.295s"]);
  });

  it("nats.embedded_max_payload: a size from 1KiB to nats-server's 64MiB", async () => {
    expect(
      config(await loadConfig({ file: await file("mp.yaml", "nats: { embedded_max_payload: 16MiB }\n") })).nats
        .embedded_max_payload,
    ).toBe(16 * 1024 * 1024);
    expect(
      problems(await loadConfig({ file: await file("mp-big.yaml", "nats: { embedded_max_payload: 65MiB }\n") })),
    ).toEqual(["nats.embedded_max_payload: must be between 1KiB and 64MiB"]);
  });

  it('the MQTT store\'s keys (additions): name or "" for none, limits, replicas; AMQP dedupe', async () => {
    const c = config(
      await loadConfig({
        file: await file(
          "store.yaml",
          "mqtt: { messages_stream: MSGS, messages_max_bytes: 1GiB, messages_max_age: 7d, stream_replicas: 3 }\namqp: { dedupe_message_id: true }\n",
        ),
      }),
    );
    expect([
      c.mqtt.messages_stream,
      c.mqtt.messages_max_bytes,
      c.mqtt.messages_max_age,
      c.mqtt.stream_replicas,
    ]).toEqual(["MSGS", 1024 ** 3, 7 * 86_400_000, 3]);
    expect(c.amqp.dedupe_message_id).toBe(true);
    expect(
      config(await loadConfig({ file: await file("nostore.yaml", 'mqtt: { messages_stream: "" }\n') })).mqtt
        .messages_stream,
    ).toBe("");
    expect(
      problems(
        await loadConfig({
          file: await file(
            "store-bad.yaml",
            "mqtt: { messages_stream: a.b, messages_max_bytes: 0, messages_max_age: 10ms, stream_replicas: 7 }\n",
          ),
        }),
      ),
    ).toEqual([
      expect.stringMatching(/^mqtt\.messages_stream: /),
      "mqtt.messages_max_bytes: must be at least 1 byte; leave it out for no limit",
      "mqtt.messages_max_age: must be 0 (no limit) or at least 1s",
      expect.stringMatching(/^mqtt\.stream_replicas: /),
    ]);
  });

  it("publish quotas (additions): EMQX's rate forms, bursts one second of the rate unless given, every mistake named", async () => {
    const c = config(
      await loadConfig({
        file: await file(
          "quotas.yaml",
          "limits:\n  per_client: { messages_rate: 100/s, bytes_rate: 1MiB/s, bytes_burst: 4MiB }\n  per_account: { messages_rate: 6000/1m, messages_burst: 500, bytes_rate: 1/10s }\n",
        ),
      }),
    );
    expect(c.limits.per_client).toEqual({
      messages_rate: 100,
      messages_burst: 100,
      bytes_rate: 1024 ** 2,
      bytes_burst: 4 * 1024 ** 2,
    });
    expect(c.limits.per_account).toEqual({ messages_rate: 100, messages_burst: 500, bytes_rate: 0.1, bytes_burst: 1 });
    // A bare number is per second; an empty section is no quota.
    const bare = config(
      await loadConfig({
        file: await file("quotas-bare.yaml", "limits:\n  per_client: { messages_rate: 2.5 }\n  per_account:\n"),
      }),
    );
    expect(bare.limits.per_client).toEqual({ messages_rate: 2.5, messages_burst: 3, bytes_rate: 0, bytes_burst: 0 });
    expect(bare.limits.per_account.messages_rate).toBe(0);
    expect(
      problems(
        await loadConfig({
          file: await file(
            "quotas-bad.yaml",
            "limits:\n  per_client: { messages_rate: 5, messages_burst: 0, bytes_burst: 1KiB, rate: 1 }\n  per_account: { messages_rate: 5/x, bytes_rate: 10 }\n",
          ),
        }),
      ),
    ).toEqual([
      "limits.per_client.messages_burst: must be at least 1",
      expect.stringMatching(/^limits\.per_client\.rate: unknown key/),
      "limits.per_client.bytes_burst: needs bytes_rate (a burst without a rate limits nothing)",
      'limits.per_account.messages_rate: "5/x" is not a rate: "x" is not a duration such as "s", "1m"',
    ]);
  });

  it("reports YAML syntax errors and duplicate keys with the file name", async () => {
    expect(problems(await loadConfig({ file: await file("syntax.yaml", "mqtt: [\n") }))[0]).toMatch(
      /syntax\.yaml: not valid YAML/,
    );
    expect(problems(await loadConfig({ file: await file("twice.yaml", "id: a\nid: b\n") }))[0]).toMatch(
      /twice\.yaml: not valid YAML: Map keys must be unique/,
    );
    expect(problems(await loadConfig({ file: await file("list.yaml", "- a\n") }))).toEqual([
      expect.stringMatching(/list\.yaml: expected a mapping/),
    ]);
    expect(problems(await loadConfig({ file: join(dir, "missing.yaml") }))).toEqual([
      `${join(dir, "missing.yaml")}: cannot read the config file (no such file)`,
    ]);
  });

  it("refuses credentials that are incomplete or mixed", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "creds.yaml",
          `admin: { user: mqg-admin }
gateway_users:
  A: { password: x }
  B: { token: t, creds_file: /x.creds }
  C: {}
  bad.name: { token: t }
`,
        ),
      }),
    );
    expect(found).toEqual(
      expect.arrayContaining([
        "admin.password: is needed with user",
        "gateway_users.A.user: is needed with password (a password alone is a token: use token)",
        "gateway_users.B: give one of user/password, token, creds_file or nkey_seed_file, not several",
        "gateway_users.C: needs user and password, token, creds_file or nkey_seed_file",
        expect.stringMatching(/^gateway_users\["bad\.name"\]: the name "bad\.name" must be one subject token/),
        "gateway_users.B.creds_file: file /x.creds cannot be read (no such file)",
      ]),
    );
  });

  it("refuses two listeners on one port and bindings without an account once accounts are named", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "ports.yaml",
          `mqtt: { listen: "127.0.0.1:9000", websocket: "0.0.0.0:9000" }
http: { listen: "127.0.0.1:9001" }
amqp: { listen: "127.0.0.2:9001" }
gateway_users: { A: { token: t } }
bindings: [ { stream: S } ]
`,
        ),
      }),
    );
    expect(found).toEqual([
      "mqtt.websocket: port 9000 is also mqtt.listen",
      "bindings[0].account: is required once gateway_users names accounts",
    ]);
  });

  it("collects problems from every section at once, with many mistakes", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "many.yaml",
          "id: a.b\nmqtt: { receive_maximum: x, routes: [ { subject: s } ] }\namqp: { sasl: [KERBEROS] }\nlog: { format: xml }\n",
        ),
      }),
    );
    expect(found.map((l) => l.split(":")[0])).toEqual([
      "id",
      "mqtt.routes[0].template",
      "mqtt.receive_maximum",
      "amqp.sasl[0]",
      "log.format",
    ]);
    expect(found).toContain("mqtt.routes[0].template: is required");
  });
});

describe("secrets", () => {
  it("resolves file: and env: references at load and reports what is missing", async () => {
    const secretFile = await file("present.secret", "  pw \n");
    const ok = await loadConfig({
      file: await file(
        "secrets-ok.yaml",
        `admin: { user: a, password: "file:${secretFile}" }\ngateway_users:\n  P: { user: g, password: "env:GW_PW" }\n`,
      ),
      env: { GW_PW: "x" },
    });
    expect(ok.ok).toBe(true);

    const found = problems(
      await loadConfig({
        file: await file(
          "secrets-bad.yaml",
          `admin: { token: "file:${join(dir, "absent.secret")}" }
gateway_users:
  P: { user: g, password: "env:GW_PW_MISSING" }
  Q: { user: g, password: "env:GW_PW_EMPTY" }
  R: { user: g, password: "file:${await file("blank.secret", "\n\n")}" }
`,
        ),
        env: { GW_PW_EMPTY: "" },
      }),
    );
    expect(found).toEqual([
      `admin.token: secret file ${join(dir, "absent.secret")} cannot be read (no such file)`,
      "gateway_users.P.password: environment variable GW_PW_MISSING is not set",
      "gateway_users.Q.password: environment variable GW_PW_EMPTY is empty",
      `gateway_users.R.password: secret file ${join(dir, "blank.secret")} is empty`,
    ]);
  });

  it("checks TLS and credential files exist", async () => {
    const found = problems(
      await loadConfig({
        file: await file(
          "tlsfiles.yaml",
          "nats:\n  tls: { ca_file: /no/ca.pem }\nmqtt:\n  tls: { cert_file: /no/c.pem, key_file: /no/k.pem }\n",
        ),
      }),
    );
    expect(found).toEqual([
      "nats.tls.ca_file: file /no/ca.pem cannot be read (no such file)",
      "mqtt.tls.cert_file: file /no/c.pem cannot be read (no such file)",
      "mqtt.tls.key_file: file /no/k.pem cannot be read (no such file)",
    ]);
  });
});

describe("flags", () => {
  it("override the file", async () => {
    const path = await file(
      "flags.yaml",
      "id: from-file\nnats: { servers: [nats://a:4222] }\nmqtt: { listen: 0.0.0.0:1883 }\nlog: { level: warn }\n",
    );
    const c = config(
      await loadConfig({
        file: path,
        flags: {
          id: "from-flag",
          nats: "nats://b:4222, nats://c:4222",
          mqtt: "127.0.0.1:11883",
          amqp: "",
          http: ":18080",
          data: "/tmp/mqgw-data",
          logLevel: "debug",
        },
      }),
    );
    expect(c.id).toBe("from-flag");
    expect(c.nats.servers).toEqual(["nats://b:4222", "nats://c:4222"]);
    expect(c.mqtt.listen).toEqual({ host: "127.0.0.1", port: 11883 });
    expect(c.amqp.listen).toBeNull();
    expect(c.http.listen).toEqual({ host: "0.0.0.0", port: 18080 });
    expect(c.data).toBe("/tmp/mqgw-data");
    expect(c.log.level).toBe("debug");
    expect(c.source).toEqual({ file: path, flags: expect.objectContaining({ id: "from-flag" }), id_generated: false });
  });

  it('--nats "" means the embedded nats-server even when the file names servers', async () => {
    const c = config(
      await loadConfig({
        file: await file("servers.yaml", "nats: { servers: [nats://a:4222] }\n"),
        flags: { nats: "" },
      }),
    );
    expect(c.nats.servers).toEqual([]);
  });

  it("name the flag in a problem they cause", async () => {
    const found = problems(await loadConfig({ flags: { mqtt: "nowhere", logLevel: "loud", id: "a.b", data: "" } }));
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^mqtt\.listen \(from --mqtt\): "nowhere" is not HOST:PORT/),
        expect.stringMatching(/^log\.level \(from --log-level\): expected one of/),
        expect.stringMatching(/^id \(from --id\): must be one subject token/),
        "data (from --data): must not be empty",
      ]),
    );
  });
});
