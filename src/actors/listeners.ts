import { readFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer as createTcpServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import { Effect, type Scope } from "effect";
import { createWebSocketStream, WebSocketServer } from "ws";

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export interface TlsFiles {
  readonly cert_file: string;
  readonly key_file: string;
  readonly ca_file?: string | undefined;
  readonly verify_clients?: boolean | undefined;
}

export type OnConnection = (stream: Duplex, remote: string, peer?: TLSSocket) => void;

export class ListenError extends Error {}

/** A listening server owned by the scope: closing the scope stops accepting. */
const bound = (server: Server | ReturnType<typeof createHttpServer>, at: HostPort, what: string) =>
  Effect.acquireRelease(
    Effect.callback<Server | ReturnType<typeof createHttpServer>, ListenError>((resume) => {
      const onError = (e: Error) => resume(Effect.fail(new ListenError(`cannot listen for ${what} on ${at.host}:${at.port}: ${e.message}`)));
      server.once("error", onError);
      server.listen(at.port, at.host, () => {
        server.off("error", onError);
        resume(Effect.succeed(server));
      });
    }),
    (s) => Effect.sync(() => s.close()),
  );

export function remoteOf(socket: Socket): string {
  const host = socket.remoteAddress ?? "";
  return `${host.includes(":") ? `[${host}]` : host}:${socket.remotePort ?? 0}`;
}

export const listenTcp = (at: HostPort, what: string, onConnection: OnConnection): Effect.Effect<Server, ListenError, Scope.Scope> => {
  const server = createTcpServer({ noDelay: true }, (socket) => onConnection(socket, remoteOf(socket)));
  return bound(server, at, what) as Effect.Effect<Server, ListenError, Scope.Scope>;
};

export const listenTls = (at: HostPort, files: TlsFiles, what: string, onConnection: OnConnection): Effect.Effect<Server, ListenError, Scope.Scope> => {
  const server = createTlsServer(
    {
      cert: readFileSync(files.cert_file),
      key: readFileSync(files.key_file),
      ...(files.ca_file ? { ca: readFileSync(files.ca_file) } : {}),
      requestCert: files.verify_clients === true,
      rejectUnauthorized: files.verify_clients === true,
    },
    (socket) => onConnection(socket, remoteOf(socket), socket),
  );
  return bound(server, at, what) as Effect.Effect<Server, ListenError, Scope.Scope>;
};

/** MQTT over WebSocket: path /mqtt, subprotocol "mqtt" (what browsers' MQTT clients ask for). */
export const listenWebSocket = (at: HostPort, path: string, onConnection: OnConnection): Effect.Effect<unknown, ListenError, Scope.Scope> => {
  const http = createHttpServer((_req, res) => {
    res.writeHead(426, { "content-type": "text/plain" }).end("MQTT over WebSocket: connect to /mqtt\n");
  });
  const wss = new WebSocketServer({
    server: http,
    path,
    handleProtocols: (protocols) => (protocols.has("mqtt") ? "mqtt" : protocols.has("mqttv3.1") ? "mqttv3.1" : false),
  });
  wss.on("connection", (ws, req) => {
    const stream = createWebSocketStream(ws, {});
    onConnection(stream, remoteOf(req.socket));
  });
  return bound(http, at, "MQTT over WebSocket").pipe(Effect.tap(() => Effect.addFinalizer(() => Effect.sync(() => wss.close()))));
};
