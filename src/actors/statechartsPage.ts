import { createReadStream } from "node:fs";
import type { ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { AnyStateMachine } from "xstate";
import { machineView, statechartsHtml } from "../statecharts/page.js";
import type { ClientHandle, ClientRegistry } from "./clients.js";
import { type Handler, sendJson } from "./http.js";
import { type ActorRegistry, configuration } from "./registry.js";
import { statechartsViewerActor, transitionView, type ViewerSettings } from "./statechartsViewer.js";
import type { Supervisor } from "./supervisor.js";

/** Browsers following the page at once, at most: each recounts every actor per burst of changes. */
const MAX_VIEWERS = 32;
const VIEWER: ViewerSettings = { heartbeatMs: 15_000, stallMs: 30_000 };

// Served from the installed package: the page fetches nothing from the internet.
const MERMAID = createRequire(import.meta.url).resolve("mermaid/dist/mermaid.min.js");
// The page's own script (src/statecharts/browser.ts), compiled by tsc into dist/statecharts/.
const PAGE_SCRIPT = fileURLToPath(new URL("../statecharts/browser.js", import.meta.url));

/**
 * The routes of the live statecharts page: the page, its two scripts, the event stream
 * (one statechartsViewer actor per browser) and the drill-down to one actor.
 */
export function statechartsRoutes(deps: {
  readonly machines: readonly AnyStateMachine[];
  readonly registry: ActorRegistry;
  readonly clients: ClientRegistry;
  readonly supervisor: Supervisor;
}): Record<string, Handler> {
  const html = statechartsHtml(deps.machines.map(machineView));
  let viewers = 0;
  return {
    "/statecharts": (_req, res) => {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-cache" }).end(html);
    },
    "/statecharts/mermaid.min.js": (_req, res) => sendFile(res, MERMAID, "public, max-age=86400"),
    "/statecharts/page.js": (_req, res) => sendFile(res, PAGE_SCRIPT, "no-cache"),
    "/statecharts/events": (_req, res) => {
      if (deps.registry.size("statechartsViewer") >= MAX_VIEWERS) {
        res.writeHead(503, { "content-type": "text/plain", "retry-after": "10" }).end("too many viewers\n");
        return;
      }
      const id = `statechartsViewer-${++viewers}`;
      deps.supervisor.spawn(id, "statechartsViewer", statechartsViewerActor(res, deps.registry, VIEWER, id));
    },
    "/statecharts/actor": (req, res) => {
      const q = new URL(req.url ?? "/", "http://localhost").searchParams.get("q")?.trim() ?? "";
      const found = q
        ? describeActor(q, deps.clients, deps.registry)
        : { error: "ask for a client id, a cid or an actor id" };
      sendJson(res, "error" in found ? 404 : 200, found);
    },
  };
}

/**
 * The actor a drill-down asks for: by actor id, by cid, or by client id (the newest
 * connection when several share it). A client's connection actor is `<protocol>-<cid>`.
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
  const { machine, actor } = found;
  return {
    machine,
    id: actor.id,
    state: configuration(actor.getSnapshot()),
    recent: registry.recent(actor).map((t) => transitionView({ ...t, machine, actor })),
    ...(handle
      ? {
          client: {
            cid: handle.cid,
            client_id: handle.clientId,
            protocol: handle.protocol,
            account: handle.account,
            remote: handle.remote,
            since: handle.since.toISOString(),
          },
        }
      : {}),
    ...(others.length ? { others } : {}),
  };
}

function sendFile(res: ServerResponse, file: string, cacheControl: string): void {
  res.writeHead(200, { "content-type": "text/javascript; charset=utf-8", "cache-control": cacheControl });
  createReadStream(file)
    .on("error", () => res.destroy())
    .pipe(res);
}
