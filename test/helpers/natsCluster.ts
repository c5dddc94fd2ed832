import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { type NatsServerHandle, startNatsServer } from "./natsServer.js";
import { eventually } from "./poll.js";
import { freePort } from "./ports.js";

export interface NatsClusterHandle {
  /** Node name -> its server, in start order (n1, n2, ...). */
  readonly nodes: Record<string, NatsServerHandle>;
  /** Every node's client URL, comma-separated, as `--nats` takes it. */
  readonly urls: string;
  /** Stops one node (SIGKILL: a crash, not a lame-duck exit). */
  kill(name: string): Promise<void>;
  /**
   * Starts a killed node again on its port, routes and store; resolves once JetStream
   * answers through it (the node has caught up with the meta group).
   */
  restart(name: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A real JetStream cluster of `size` nats-server processes on loopback ports, each with its
 * own store directory, routes to every other node, resolved once JetStream answers on
 * every node (a meta leader is elected and each node knows it).
 */
export async function startNatsCluster(
  options: { size?: number; name?: string; extraConfig?: string } = {},
): Promise<NatsClusterHandle> {
  const size = options.size ?? 3;
  const cluster = options.name ?? `mqgw-${Math.random().toString(16).slice(2, 8)}`;
  const routePorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const names = routePorts.map((_, i) => `n${i + 1}`);
  const config = (i: number) => `
server_name: ${names[i]}
cluster {
  name: ${cluster}
  listen: 127.0.0.1:${routePorts[i]}
  routes: [ ${routePorts.map((p) => `"nats-route://127.0.0.1:${p}"`).join(", ")} ]
}
${options.extraConfig ?? ""}
`;
  const started = await Promise.all(names.map((_, i) => startNatsServer({ config: config(i) })));
  const nodes: Record<string, NatsServerHandle> = Object.fromEntries(names.map((n, i) => [n, started[i]!]));
  // JetStream in a cluster answers only once the meta group has a leader every node knows of.
  const answers = (node: NatsServerHandle) =>
    eventually(
      async () => {
        const nc = await connect({ servers: node.url });
        try {
          const jsm = await jetstreamManager(nc, { timeout: 2_000 });
          const info = await jsm.getAccountInfo();
          return info ? true : undefined;
        } finally {
          await nc.close();
        }
      },
      30_000,
      `JetStream on cluster node ${node.url}`,
    );
  for (const node of started) await answers(node);
  return {
    nodes,
    urls: started.map((n) => n.url).join(","),
    restart: async (name) => {
      const i = names.indexOf(name);
      const old = nodes[name];
      if (i < 0 || !old) throw new Error(`no node ${name}`);
      if (old.process.exitCode === null && old.process.signalCode === null) return;
      const again = await startNatsServer({ config: config(i), port: old.port, storeDir: old.storeDir });
      nodes[name] = again;
      started[i] = again;
      await answers(again);
    },
    kill: async (name) => {
      const n = nodes[name];
      if (!n || n.process.exitCode !== null || n.process.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        n.process.once("exit", () => resolve());
        n.process.kill("SIGKILL");
      });
    },
    stop: async () => {
      await Promise.all(started.map((n) => n.stop()));
    },
  };
}
