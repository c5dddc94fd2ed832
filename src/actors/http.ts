import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Effect, type Scope } from "effect";
import type { HostPort } from "./listeners.js";
import { ListenError } from "./listeners.js";

export type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** The operator's HTTP port: a route table, served until the scope closes. */
/** Resolves to the port bound (the one asked for, or a free one for port 0). */
export const serveHttp = (
  at: HostPort,
  routes: Record<string, Handler>,
): Effect.Effect<number, ListenError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<ReturnType<typeof createServer>, ListenError>((resume) => {
      const server = createServer((req, res) => {
        const path = (req.url ?? "/").split("?")[0] ?? "/";
        const handler = routes[path];
        if (!handler || (req.method !== "GET" && req.method !== "HEAD")) {
          res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
          return;
        }
        Promise.resolve(handler(req, res)).catch((e: Error) => {
          if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
          res.end(`${e.message}\n`);
        });
      });
      server.once("error", (e: NodeJS.ErrnoException) =>
        resume(
          Effect.fail(new ListenError(`cannot listen for HTTP on ${at.host}:${at.port}: ${e.message}`, at, e.code)),
        ),
      );
      server.listen(at.port, at.host, () => resume(Effect.succeed(server)));
    }),
    (server) =>
      Effect.sync(() => {
        server.close();
        server.closeAllConnections();
      }),
  ).pipe(Effect.map((server) => (server.address() as { port: number }).port));

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(`${JSON.stringify(body)}\n`);
}
