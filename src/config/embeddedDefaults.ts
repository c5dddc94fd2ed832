// CONTRACT "Config file": the client listeners default to 0.0.0.0, but to 127.0.0.1 while
// the gateway runs its own embedded nats-server, which authenticates nobody. Like
// Mosquitto 2 without a config: reachable from this machine only until the operator says
// otherwise. What an operator writes is never changed; only missing addresses are filled.

type Tree = Record<string, unknown>;

/** The client listeners and their loopback defaults with the embedded nats-server. */
const LOOPBACK_DEFAULTS: readonly [readonly string[], string][] = [
  [["mqtt", "listen"], "127.0.0.1:1883"],
  [["mqtt", "tls", "listen"], "127.0.0.1:8883"],
  [["amqp", "listen"], "127.0.0.1:5672"],
  [["amqp", "tls", "listen"], "127.0.0.1:5671"],
];

/** True when the tree names no NATS server: the gateway will start the embedded one. */
export function namesNoServers(tree: Tree): boolean {
  const nats = tree.nats;
  if (nats === undefined || nats === null) return true;
  if (!isMapping(nats)) return false;
  const servers = nats.servers;
  return servers === undefined || servers === null || (Array.isArray(servers) && servers.length === 0);
}

/** The tree with the loopback defaults written in where the embedded nats-server will run. */
export function withEmbeddedDefaults(tree: Tree): Tree {
  if (!namesNoServers(tree)) return tree;
  const out: Tree = { ...tree };
  for (const [path, address] of LOOPBACK_DEFAULTS) fill(out, path, address);
  return out;
}

/**
 * Writes `value` at `path` when nothing is there. A missing protocol section is made;
 * a missing `tls` section stays missing (TLS is off until configured). A section that
 * is not a mapping is left for the schema to report.
 */
function fill(tree: Tree, path: readonly string[], value: string): void {
  let node = tree;
  for (const [i, key] of path.slice(0, -1).entries()) {
    const next = node[key];
    if (next === undefined || next === null) {
      if (i > 0) return;
      node[key] = {};
    } else if (!isMapping(next)) return;
    else node[key] = { ...next };
    node = node[key] as Tree;
  }
  const last = path[path.length - 1] as string;
  if (node[last] === undefined) node[last] = value;
}

function isMapping(value: unknown): value is Tree {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
