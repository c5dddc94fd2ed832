import { parseDuration } from "../../config/units.js";
import { err, ok, type Result } from "../../protocol/result.js";

export interface RebalanceRequest {
  readonly account: string;
  /** A server name or URL, as the operator knows it. */
  readonly server: string;
  /** Undefined: every client of the account on this gateway. */
  readonly max: number | undefined;
  /** Milliseconds the moves are spread over; 0 = one after the other at once. */
  readonly overMs: number;
}

export type RebalanceReply =
  | { started: true; server: string; max: number; over: string }
  | { started: false; reason: string };

/** `{"account", "server", "max"?, "over"?}` of the spec's rebalance row. */
export function rebalanceRequest(body: Record<string, unknown>): Result<RebalanceRequest> {
  const { account, server, max, over } = body;
  if (typeof account !== "string") return err("rebalance needs account, a string");
  if (typeof server !== "string" || server === "") return err("rebalance needs server, a server name or URL");
  if (max !== undefined && (typeof max !== "number" || !Number.isSafeInteger(max) || max < 1))
    return err("max must be a whole number of at least 1");
  let overMs = 0;
  if (over !== undefined) {
    const d = parseDuration(over);
    if (!d.ok) return err(`over: ${d.error}`);
    overMs = d.value;
  }
  return ok({ account, server, max, overMs });
}
