/**
 * What one claim on `$MQG.claim.<id>` says: this client id connected here at `at` (Unix
 * ms). A gateway that holds an older connection of the id closes it (liveness.ts).
 */
export interface Claim {
  readonly client_id: string;
  readonly at: number;
  /** Absent in claims of gateways from before it was sent. */
  readonly clean_start?: boolean | undefined;
}

/** How long a claim may wait for others to share its message: a connect storm is a few messages, not one per client. */
export const CLAIM_BATCH_MS = 50;
/** A batch this big goes at once (about 70 bytes a claim: 36 KB, far under any max_payload). */
const MAX_BATCH = 512;
/**
 * Nor does a batch grow past this many bytes: client ids may be as long as nats.max_control_line
 * allows (kilobytes), and 512 of those would pass max_payload (1 MB by default), where the
 * publish fails and every claim in it is lost.
 */
export const MAX_BATCH_BYTES = 64 * 1024;
/** A claim's bytes at most: its id's UTF-16 units written as JSON escapes (6 each), and its fields. */
const claimBytes = (clientId: string) => 64 + 6 * clientId.length;

/**
 * Gathers the claims of one account for CLAIM_BATCH_MS and sends them as one message
 * (docs/decisions/claims.md). A single claim keeps the one-claim shape
 * `{account, client_id, at, clean_start}`; several go as `{account, claims: [...]}`.
 * Each claim used to be a publish of its own: a write by the gateway, a routing and a
 * delivery back by nats-server, about a fifth of a connect's CPU (docs/performance.md).
 * A claim is advice to the other gateways (the bucket's conditional writes keep a session
 * whole whatever they do), so a few milliseconds of delay change nothing a client sees.
 */
export class ClaimAnnouncer {
  private readonly pending = new Map<string, { claims: Claim[]; bytes: number }>();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    /** Sends one message of the account's claims (the account's NATS connection, on `$MQG.claim.<id>`). */
    private readonly send: (account: string, payload: string) => void,
    private readonly delayMs = CLAIM_BATCH_MS,
  ) {}

  announce(account: string, clientId: string, cleanStart: boolean): void {
    const bytes = claimBytes(clientId);
    let batch = this.pending.get(account);
    if (batch && batch.bytes + bytes > MAX_BATCH_BYTES) {
      this.sendNow(account, batch.claims);
      batch = undefined;
    }
    if (!batch) this.pending.set(account, (batch = { claims: [], bytes: 0 }));
    batch.claims.push({ client_id: clientId, at: Date.now(), clean_start: cleanStart });
    batch.bytes += bytes;
    if (batch.claims.length >= MAX_BATCH) return this.sendNow(account, batch.claims);
    if (this.timer) return;
    this.timer = setTimeout(() => this.flush(), this.delayMs);
    // Claims of clients that are going away are not worth keeping a stopping process for.
    this.timer.unref?.();
  }

  /** Sends what waits now (the window's timer). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batches = [...this.pending];
    this.pending.clear();
    for (const [account, { claims }] of batches) this.send(account, claimPayload(account, claims));
  }

  private sendNow(account: string, claims: readonly Claim[]): void {
    this.pending.delete(account);
    this.send(account, claimPayload(account, claims));
  }
}

function claimPayload(account: string, claims: readonly Claim[]): string {
  return claims.length === 1 ? JSON.stringify({ account, ...claims[0] }) : JSON.stringify({ account, claims });
}

/** The claims of a message in either shape; malformed entries are left out. */
export function claimsOf(message: unknown): { account: string | undefined; claims: Claim[] } {
  if (!message || typeof message !== "object") return { account: undefined, claims: [] };
  const m = message as { account?: unknown; claims?: unknown };
  const account = typeof m.account === "string" ? m.account : undefined;
  const list = Array.isArray(m.claims) ? m.claims : [m];
  const claims = list.filter((c): c is Claim => !!c && typeof c.client_id === "string" && typeof c.at === "number");
  return { account, claims };
}
