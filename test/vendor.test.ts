// Third-party internals the gateway patches or reads live in src/vendor, one module per
// library, each naming the upstream functions it relies on. This fails when the source of
// one of them changes (a dependency upgraded): read the change, adapt the vendor module,
// then record the new hash here. docs/decisions/vendor-patches.md says which could go upstream.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { upstream as debug } from "../src/vendor/debug.js";
import { upstream as mqttPacket } from "../src/vendor/mqttPacket.js";
import { upstream as natsjs } from "../src/vendor/natsjs.js";
import { upstream as rhea } from "../src/vendor/rhea.js";

/** The source of an object's own functions, by name. */
function functionsOf(o: object): string[] {
  const out: string[] = [];
  for (const name of Object.getOwnPropertyNames(o).sort()) {
    const f = Object.getOwnPropertyDescriptor(o, name)?.value;
    if (typeof f === "function" && name !== "constructor") out.push(`${name}: ${Function.prototype.toString.call(f)}`);
  }
  return out;
}

/**
 * A function's source, with its prototype's functions for the pre-class style (rhea's
 * `X.prototype.f = function ...`); for a plain object (a prototype), its functions.
 */
function sourceOf(v: unknown): string {
  if (typeof v === "object" && v !== null) return functionsOf(v).join("\n");
  if (typeof v !== "function") throw new Error(`not a function: ${String(v)}`);
  const proto = (v as { prototype?: object }).prototype;
  return [Function.prototype.toString.call(v), ...(proto ? functionsOf(proto) : [])].join("\n");
}

const hash = (v: unknown) => createHash("sha256").update(sourceOf(v)).digest("hex").slice(0, 16);

/** Recorded with rhea 3.0.5, mqtt-packet 9.0.2, nats.js 3.4.0, debug 4.4.3. */
const RECORDED: Record<string, Record<string, string>> = {
  rhea: {
    "lib/message.js decode": "cc318fd63b1006d3",
    "lib/session.js Session.prototype.on_attach": "a10ae8b8f1cbf95e",
    "lib/session.js Session.prototype.on_transfer": "3d6ebe3dfdd17751",
    "lib/session.js Session.prototype._write_flow": "4302eed01bd2b39c",
    "lib/sasl.js Server.prototype.on_sasl_init": "5c7924c11a93ded8",
    "lib/link.js link (what Sender and Receiver share)": "ba6856ea68c7d2bf",
    "lib/link.js Sender": "3dcda80e92b8775c",
    "lib/link.js Receiver": "15cedf1247442f4d",
    "lib/connection.js Connection.prototype.input": "caeea0e2e5425f15",
    "lib/connection.js Connection.prototype.output": "c7546fe3024dc489",
    "lib/endpoint.js EndpointState": "a0c47a4063a675ac",
    "lib/frames.js transfer": "541aa6f83289d6bd",
    "lib/frames.js write_frame": "adbebbf3c6b19678",
    "lib/frames.js read_frame": "5aed2ade576aa5c1",
    "lib/types.js List0 create": "1472428897d83990",
  },
  "mqtt-packet": { "mqtt-packet parser.js Parser": "762ac65e88dac06a" },
  debug: { "debug src/common.js setup": "8a5aaef99c2468bb" },
  "nats.js": {
    "@nats-io/nats-core MsgImpl": "28f832dee5935cdf",
    "@nats-io/nats-core NatsConnectionImpl": "d74d52ca379b513a",
    "@nats-io/nats-core ProtocolHandler.sendCommand": "674ae0825cde1a19",
    "@nats-io/nats-core ProtocolHandler.publish": "02790bbc42772438",
    "@nats-io/nats-core ProtocolHandler.close": "20a78db863887ffc",
    "@nats-io/nats-core ProtocolHandler.flush": "b0558b96016c53c3",
    "@nats-io/nats-core RequestOne.resolver": "f84f6fbe68261e00",
    "@nats-io/nats-core RequestOne.cancel": "5e7f460c92cad65b",
  },
};

const root = fileURLToPath(new URL("..", import.meta.url));
const pinned = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).dependencies as Record<
  string,
  string
>;

describe("third-party internals are behind src/vendor, pinned, and checked", () => {
  it.each([
    ["rhea", rhea],
    ["mqtt-packet", mqttPacket],
    ["nats.js", natsjs],
    ["debug", debug],
  ] as const)(
    "%s: every upstream function a patch or reader relies on is the one it was written against",
    (library, functions) => {
      const actual = Object.fromEntries(Object.entries(functions).map(([name, f]) => [name, hash(f)]));
      expect(actual).toEqual(RECORDED[library]);
    },
  );

  it("a function whose source changed hashes differently, however small the change", () => {
    const before = new Function("frame", "return frame.performative.name;");
    const after = new Function("frame", "return frame.performative.name ;");
    expect(hash(after)).not.toBe(hash(before));
  });

  it("rhea and mqtt-packet log nothing and gather nothing unless DEBUG is set; with it set, `debug` is the real one", () => {
    // In a process of its own, as the gateway's: the quiet `debug` must be in place before they load.
    const probe = [
      'await import("./dist/vendor/quietDebug.js");',
      'const { createRequire } = await import("node:module");',
      'const here = createRequire(process.cwd() + "/package.json");',
      "const out = {};",
      'for (const user of ["rhea", "mqtt-packet"]) {',
      '  const debug = createRequire(here.resolve(user))("debug");',
      '  debug.enable("*");',
      '  out[user] = debug("x").enabled;',
      "}",
      'await import("rhea");',
      "console.log(JSON.stringify(out));",
    ].join("\n");
    const run = (env: Record<string, string>) => {
      const { DEBUG: _, ...rest } = process.env;
      const r = spawnSync(process.execPath, ["--input-type=module", "-e", probe], {
        cwd: root,
        env: { ...rest, ...env },
        encoding: "utf8",
      });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout.trim());
    };
    expect(run({})).toEqual({ rhea: false, "mqtt-packet": false });
    expect(run({ DEBUG: "nothing-of-ours" })).toEqual({ rhea: true, "mqtt-packet": true });
  });

  it("those libraries are pinned to exact versions", () => {
    for (const name of [
      "rhea",
      "xstate",
      "mqtt-packet",
      "debug",
      "@nats-io/transport-node",
      "@nats-io/nats-core",
      "@nats-io/jetstream",
      "@nats-io/kv",
    ])
      expect(pinned[name], name).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
