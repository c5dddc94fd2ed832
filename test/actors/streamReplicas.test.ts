// How many replicas the gateway asks for, and how it steps down when the cluster cannot
// place them (src/actors/streamReplicas.ts), against JetStream's own error answers.
import { JetStreamApiError } from "@nats-io/jetstream";
import type { ServerInfo } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { createWithReplicas, wantedReplicas } from "../../src/actors/streamReplicas.js";
import { createLogger } from "../../src/log.js";

const log = createLogger({ level: "silent", format: "json" });
const server = (info: Record<string, unknown>) => info as unknown as ServerInfo;
const single = server({});
const cluster = (n: number) =>
  server({ cluster: "c", connect_urls: Array.from({ length: n }, (_, i) => `127.0.0.1:${4222 + i}`) });
const apiError = (err_code: number, description: string) => new JetStreamApiError({ code: 500, err_code, description });
const what = { kind: "MQTT store", name: "MQGW_MSGS", account: "" };

/** A create that places at most `peers` replicas, answering as nats-server does. */
function placing(peers: number, clustered = true) {
  const tried: number[] = [];
  const create = async (r: number) => {
    tried.push(r);
    if (r > 1 && !clustered) throw apiError(10074, "replicas > 1 not supported in non-clustered mode");
    if (r > peers) throw apiError(10005, "no suitable peers for placement");
    return r;
  };
  return { tried, create };
}

describe("stream replicas", () => {
  it("wants 1 on a single server, the cluster's size up to 3 in a cluster, and what the operator set", () => {
    expect(wantedReplicas(single, null)).toBe(1);
    expect(wantedReplicas(cluster(2), null)).toBe(2);
    expect(wantedReplicas(cluster(5), null)).toBe(3);
    // A cluster that does not advertise its members: try 3 and see.
    expect(wantedReplicas(server({ cluster: "c" }), null)).toBe(3);
    expect(wantedReplicas(single, 3)).toBe(3);
  });

  it("steps down from 3 while the cluster cannot place that many, to 1 at once when it is not a cluster", async () => {
    const two = placing(2);
    expect(await createWithReplicas(what, server({ cluster: "c" }), null, log, two.create)).toBe(2);
    expect(two.tried).toEqual([3, 2]);
    const none = placing(1, false);
    expect(await createWithReplicas(what, server({ cluster: "c" }), null, log, none.create)).toBe(1);
    expect(none.tried).toEqual([3, 1]);
  });

  it("uses a count the operator set as is: the server's refusal is the answer", async () => {
    const two = placing(2);
    await expect(createWithReplicas(what, cluster(3), 3, log, two.create)).rejects.toThrow(/no suitable peers/);
    expect(two.tried).toEqual([3]);
  });

  it("does not step down on other errors", async () => {
    const create = async () => {
      throw apiError(10047, "insufficient storage resources available");
    };
    await expect(createWithReplicas(what, cluster(3), null, log, create)).rejects.toThrow(/insufficient storage/);
  });
});
