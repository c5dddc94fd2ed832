// The primary's HTTP port under `run --workers` (docs/decisions/workers.md): one port for
// the whole gateway, as for a lone one, each answer made of every worker's. /healthz is
// 200 only when every live worker is; /metrics is every worker's series, each labelled
// worker="<k>"; /clients is every worker's clients, each with its worker's gateway id.
import type { Worker } from "node:cluster";
import { AggregatorRegistry } from "prom-client";
import { type ClientsPage, type ClientView, readQuery } from "../actors/http/clients.js";
import { type Handler, sendJson } from "../actors/http.js";
import { VERSION } from "./version.js";
import type { Health } from "./views.js";
import type { Question, WorkerMessage } from "./workerChannel.js";

const ANSWER_TIMEOUT_MS = 2_000;
type Ask = Question extends infer Q ? (Q extends Question ? Omit<Q, "mqgw" | "seq"> : never) : never;

/** Questions to the workers over their IPC channel, paired with their answers by number. */
export class WorkerQuestions {
  private seq = 0;
  private readonly waiting = new Map<number, (value: unknown) => void>();

  constructor(private readonly live: () => ReadonlyMap<number, Worker>) {}

  /** Each worker's message goes here; answers resolve their question. */
  onMessage(message: unknown): void {
    const m = message as WorkerMessage | null;
    if (m?.mqgw !== "answer") return;
    this.waiting.get(m.seq)?.(m.value);
  }

  /** Every live worker's answer, by slot; undefined for one that did not answer in time. */
  askAll(question: Ask): Promise<Array<{ index: number; value: unknown }>> {
    return Promise.all(
      [...this.live()].map(
        ([index, worker]) =>
          new Promise<{ index: number; value: unknown }>((resolve) => {
            const seq = ++this.seq;
            const done = (value: unknown) => {
              clearTimeout(timer);
              this.waiting.delete(seq);
              resolve({ index, value });
            };
            const timer = setTimeout(() => done(undefined), ANSWER_TIMEOUT_MS);
            this.waiting.set(seq, done);
            try {
              worker.send({ mqgw: "ask", seq, ...question } as Question);
            } catch {
              done(undefined);
            }
          }),
      ),
    ).then((answers) => answers.sort((a, b) => a.index - b.index));
  }
}

export function workersRoutes(deps: {
  readonly id: string;
  readonly questions: WorkerQuestions;
  /** True once every worker has served (until then /healthz says starting). */
  readonly started: () => boolean;
  readonly listeners: () => Record<string, string>;
}): Record<string, Handler> {
  const { questions } = deps;
  return {
    "/healthz": async (_req, res) => {
      const answers = await questions.askAll({ what: "health" });
      const workers = answers.map(({ index, value }) => {
        const h = value as Health | undefined;
        const body: Record<string, unknown> & { status: string } = h?.body ?? { status: "no_answer" };
        return { worker: index, http_status: h?.status ?? 503, ...body } as Record<string, unknown> & {
          status: string;
          http_status: number;
        };
      });
      const healthy = deps.started() && workers.length > 0 && workers.every((w) => w.http_status === 200);
      const first = workers[0];
      const notOk = workers.find((w) => w.http_status !== 200);
      sendJson(res, healthy ? 200 : 503, {
        status: healthy ? "ok" : !deps.started() ? "starting" : (notOk?.status ?? "no_workers"),
        id: deps.id,
        version: VERSION,
        nats: workers.length > 0 && workers.every((w) => w.nats === "connected") ? "connected" : "disconnected",
        nats_server: first?.nats_server ?? { version: null, name: null },
        admin_account: first?.admin_account ?? null,
        admin: first?.admin ?? "off",
        listeners: deps.listeners(),
        clients: workers.reduce((n, w) => n + (typeof w.clients === "number" ? w.clients : 0), 0),
        workers,
      });
    },
    "/metrics": async (_req, res) => {
      const answers = await questions.askAll({ what: "metrics" });
      const each = answers.flatMap(({ value }) => (Array.isArray(value) ? [value as object[]] : []));
      const merged = AggregatorRegistry.aggregate(each);
      res.writeHead(200, { "content-type": merged.contentType }).end(await merged.metrics());
    },
    "/clients": async (req, res) => {
      const read = readQuery(new URL(req.url ?? "/", "http://localhost").searchParams);
      if (!read.ok) return sendJson(res, 400, { error: read.error });
      const { offset, limit } = read.query;
      // Each worker's first offset+limit, merged oldest first, then this page of the whole.
      const answers = await questions.askAll({
        what: "clients",
        query: { ...read.query, offset: 0, limit: offset + limit },
      });
      let total = 0;
      const all: Array<ClientView & { gateway: string }> = [];
      for (const { value } of answers) {
        const page = value as ClientsPage | undefined;
        if (!page?.clients) continue;
        total += page.total;
        for (const c of page.clients) all.push({ ...c, gateway: page.id });
      }
      all.sort((a, b) => a.since.localeCompare(b.since) || a.gateway.localeCompare(b.gateway) || a.cid - b.cid);
      const clients = all.slice(offset, offset + limit);
      sendJson(res, 200, {
        id: deps.id,
        now: new Date().toISOString(),
        total,
        offset,
        limit,
        count: clients.length,
        clients,
      });
    },
  };
}
