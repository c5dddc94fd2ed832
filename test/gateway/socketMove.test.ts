// What moving a socket between the processes of `run --workers` relies on (src/gateway/socketMove.ts),
// on real loopback sockets: a stopped socket takes nothing more, and the handle reads on elsewhere.
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { canMove, handleOf, socketOver, stopReading } from "../../src/gateway/socketMove.js";

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A connected pair: the accepted socket and the client's. */
async function pair(): Promise<{ accepted: Socket; client: Socket }> {
  let accept!: (s: Socket) => void;
  const accepted = new Promise<Socket>((r) => (accept = r));
  const server = createServer(accept);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  const client = await new Promise<Socket>((r) => {
    const c = tcpConnect(port, "127.0.0.1", () => r(c));
  });
  return { accepted: await accepted, client };
}

const written = (s: Socket, data: string) => new Promise<void>((r) => s.write(data, () => r()));
/** Turns of the event loop: a readable socket whose reads were not stopped is read in one. */
const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
const readAll = (s: Socket) =>
  new Promise<string>((resolve) => {
    let got = "";
    s.on("data", (d) => (got += d));
    s.on("end", () => resolve(got));
  });

describe("moving a socket: its reads stopped here, read on over its handle", () => {
  it("answers what the socket had read and not handed on", async () => {
    const { accepted, client } = await pair();
    accepted.pause();
    await written(client, "CONNECT");
    await new Promise((r) => accepted.once("readable", r));
    expect(stopReading(accepted)?.toString()).toBe("CONNECT");
    client.destroy();
    accepted.destroy();
  });

  it("takes nothing that arrives after: the next reader of the handle gets it all, in order", async () => {
    const { accepted, client } = await pair();
    accepted.pause();
    expect(stopReading(accepted)).toBeUndefined();
    await written(client, "SUBSCRIBE");
    await written(client, "PUBLISH");
    client.end();
    await turns(5);
    // Nothing was read here: a paused socket alone would have buffered both.
    expect(accepted.readableLength).toBe(0);
    expect(await readAll(socketOver(handleOf(accepted)!))).toBe("SUBSCRIBEPUBLISH");
  });

  it("moves plain TCP sockets only, while open", async () => {
    const { accepted, client } = await pair();
    expect(canMove(accepted)).toBe(true);
    accepted.destroy();
    expect(canMove(accepted)).toBe(false);
    client.destroy();
  });
});
