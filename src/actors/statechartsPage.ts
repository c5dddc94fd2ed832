import { createReadStream, readFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";
import type { AnyStateMachine } from "xstate";
import { machineView, statechartsHtml } from "../statecharts/page.js";
import { within } from "../statecharts/paths.js";
import type { ClientHandle, ClientRegistry } from "./clients.js";
import { type Handler, sendJson } from "./http.js";
import { type ActorRegistry, configuration } from "./registry.js";
import {
  type ChartFeed,
  registryFeed,
  statechartsViewerActor,
  transitionView,
  type ViewerSettings,
} from "./statechartsViewer.js";
import type { Supervisor } from "./supervisor.js";

/** Browsers following the page at once, at most: each recounts every actor per burst of changes. */
const MAX_VIEWERS = 32;
const VIEWER: ViewerSettings = { heartbeatMs: 15_000, stallMs: 30_000 };
/** Actors listed for a clicked state, at most. */
export const IN_STATE_SHOWN = 100;

// The drawings `mq-gateway statecharts` wrote (ELK takes seconds to lay out the biggest
// machines, so the gateway draws nothing itself), and the page's script, compiled by tsc.
const DRAWINGS = new URL("../../docs/statecharts/", import.meta.url);
const SCRIPTS: Record<string, string> = {
  "/statecharts/page.js": fileURLToPath(new URL("../statecharts/browser.js", import.meta.url)),
  "/statecharts/paths.js": fileURLToPath(new URL("../statecharts/paths.js", import.meta.url)),
  "/statecharts/panZoom.js": fileURLToPath(new URL("../statecharts/panZoom.js", import.meta.url)),
};

const drawingOf = (id: string): string => {
  try {
    return readFileSync(new URL(`${id}.svg`, DRAWINGS), "utf8");
  } catch {
    return `<p class="error">No drawing of ${id}: run <code>npm run statecharts</code>.</p>`;
  }
};

/** The page and its scripts: the same for a lone gateway and for the primary of `--workers`. */
export function statechartsPageRoutes(machines: readonly AnyStateMachine[]): Record<string, Handler> {
  let html: string | undefined;
  const routes: Record<string, Handler> = {
    "/statecharts": (_req, res) => {
      html ??= statechartsHtml(machines.map(machineView), drawingOf);
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-cache" }).end(html);
    },
  };
  for (const [path, file] of Object.entries(SCRIPTS)) routes[path] = (_req, res) => sendFile(res, file);
  return routes;
}

/** A viewer's event stream as a supervised actor, within the viewer limit. */
export function eventsRoute(deps: {
  readonly feed: ChartFeed;
  readonly registry: ActorRegistry;
  readonly supervisor: Supervisor;
}): Handler {
  let viewers = 0;
  return (_req, res) => {
    if (deps.registry.size("statechartsViewer") >= MAX_VIEWERS) {
      res.writeHead(503, { "content-type": "text/plain", "retry-after": "10" }).end("too many viewers\n");
      return;
    }
    const id = `statechartsViewer-${++viewers}`;
    deps.supervisor.spawn(id, "statechartsViewer", statechartsViewerActor(res, deps.feed, deps.registry, VIEWER, id));
  };
}

/**
 * The routes of the live statecharts page: the page, its scripts, the event stream (one
 * statechartsViewer actor per browser), one actor's path and who is in a state.
 */
export function statechartsRoutes(deps: {
  readonly machines: readonly AnyStateMachine[];
  readonly registry: ActorRegistry;
  readonly clients: ClientRegistry;
  readonly supervisor: Supervisor;
}): Record<string, Handler> {
  return {
    ...statechartsPageRoutes(deps.machines),
    "/statecharts/events": eventsRoute({
      feed: registryFeed(deps.registry),
      registry: deps.registry,
      supervisor: deps.supervisor,
    }),
    "/statecharts/actor": (req, res) => {
      const q = new URL(req.url ?? "/", "http://localhost").searchParams.get("q")?.trim() ?? "";
      const found = q
        ? describeActor(q, deps.clients, deps.registry)
        : { error: "ask for a client id, a cid or an actor id" };
      sendJson(res, "error" in found ? 404 : 200, found);
    },
    "/statecharts/state": (req, res) => {
      const found = actorsInState(
        new URL(req.url ?? "/", "http://localhost").searchParams,
        deps.clients,
        deps.registry,
      );
      sendJson(res, "error" in found ? 400 : 200, found);
    },
  };
}

/** A connection actor is `<protocol>-<cid>`, its sessions and links `<protocol>-<cid>/...`. */
const CLIENT_ACTOR = /^(?:mqtt|amqp)-(\d+)(?:\/|$)/;

function clientView(handle: ClientHandle): Record<string, unknown> {
  return {
    cid: handle.cid,
    client_id: handle.clientId,
    protocol: handle.protocol,
    account: handle.account,
    remote: handle.remote,
    since: handle.since.toISOString(),
  };
}

/** The actors of one machine in a state or below it (`?machine=&state=`), clients first named. */
export function actorsInState(
  query: URLSearchParams,
  clients: ClientRegistry,
  registry: ActorRegistry,
): { error: string } | { total: number; actors: Array<Record<string, unknown>> } {
  const machine = query.get("machine") ?? "";
  const state = query.get("state") ?? "";
  if (!machine || !state) return { error: "ask for ?machine=<machine id>&state=<state path>" };
  let total = 0;
  const actors: Array<Record<string, unknown>> = [];
  for (const actor of registry.actorsOf(machine)) {
    const config = configuration(actor.getSnapshot());
    if (!within(config, state)) continue;
    total++;
    if (actors.length >= IN_STATE_SHOWN) continue;
    const cid = CLIENT_ACTOR.exec(actor.id)?.[1];
    const handle = cid === undefined ? undefined : clients.get(Number(cid));
    actors.push({
      id: actor.id,
      state: config,
      since: registry.enteredAt(actor) ?? null,
      ...(handle ? { client: clientView(handle) } : {}),
    });
  }
  return { total, actors };
}

/**
 * The actor a drill-down asks for: by actor id, by cid, or by client id (the newest
 * connection when several share it), with the client's other machines (its session).
 */
export function describeActor(q: string, clients: ClientRegistry, registry: ActorRegistry): Record<string, unknown> {
  let handle: ClientHandle | undefined;
  let others: number[] = [];
  let found = registry.find(q);
  if (!found) {
    const byId = [...clients.all()].filter((h) => h.clientId === q).sort((a, b) => b.cid - a.cid);
    handle = /^\d+$/.test(q) ? (clients.get(Number(q)) ?? byId[0]) : byId[0];
    others = byId.filter((h) => h !== handle).map((h) => h.cid);
    if (!handle) return { error: `no actor, cid or client id ${q} on this gateway` };
    found = registry.find(`${handle.protocol}-${handle.cid}`);
    if (!found) return { error: `client ${q} (cid ${handle.cid}) has no live actor` };
  }
  const cid = CLIENT_ACTOR.exec(found.actor.id)?.[1];
  handle ??= cid === undefined ? undefined : clients.get(Number(cid));
  // A client's machines: its connection `<protocol>-<cid>`, and the sessions and links named under it.
  const base = found.actor.id.split("/")[0]!;
  const connection = base === found.actor.id ? undefined : registry.find(base);
  const related = [...(connection ? [connection] : []), ...registry.findByPrefix(`${base}/`)]
    .filter((r) => r.actor !== found.actor)
    .map((r) => actorView(r.machine, r.actor, registry));
  return {
    ...actorView(found.machine, found.actor, registry),
    ...(handle ? { client: clientView(handle) } : {}),
    ...(others.length ? { others } : {}),
    ...(related.length ? { related } : {}),
  };
}

function actorView(
  machine: string,
  actor: Parameters<ActorRegistry["recent"]>[0],
  registry: ActorRegistry,
): Record<string, unknown> {
  return {
    machine,
    id: actor.id,
    state: configuration(actor.getSnapshot()),
    recent: registry.recent(actor).map((t) => transitionView({ ...t, machine, actor })),
  };
}

function sendFile(res: ServerResponse, file: string): void {
  res.writeHead(200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-cache" });
  createReadStream(file)
    .on("error", () => res.destroy())
    .pipe(res);
}
