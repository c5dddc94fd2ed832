// What every ctl command shares: its options, where it writes, and how replies are read.
import type { AdminClient, CtlConnectionFlags, Reply } from "./ctlClient.js";
import { CtlError } from "./ctlError.js";

export interface CtlOptions extends CtlConnectionFlags {
  readonly timeout: string;
  readonly json?: boolean;
}

export type Out = { write(text: string): void };

/** A ctl command's body, as `run` in ctl.ts calls it. */
export type CtlBody = (admin: AdminClient, options: CtlOptions, out: Out, ...positional: unknown[]) => Promise<number>;

export const sortById = (replies: Reply[]) => [...replies].sort((a, b) => String(a.id).localeCompare(String(b.id)));

export const json = (out: Out, value: unknown) => out.write(`${JSON.stringify(value, null, 2)}\n`);

/** A gateway's `{"id", "error"}` answer (malformed request, wrong scope) as ctl's failure. */
export function refusedBy(replies: Reply[]): void {
  const errors = replies.filter((r) => typeof r.error === "string");
  if (errors.length > 0)
    throw new CtlError(errors.map((r) => `gateway ${String(r.id)}: ${String(r.error)}`).join("\n"));
}

export function noGateway(subject: string, waitMs: string): CtlError {
  return new CtlError(
    `no gateway answered ${subject} within ${waitMs}: is one running with the admin API on? (its /healthz says "admin": "serving")`,
    2,
  );
}

export async function gatewayReplies(
  admin: AdminClient,
  op: string,
  scope: { gateway?: string; account?: string },
  body: object,
  options: CtlOptions,
): Promise<Reply[]> {
  if (scope.gateway) return [await admin.one(`$MQG.admin.server.${scope.gateway}.${op}`, body)];
  const subject = scope.account ? `$MQG.admin.account.${scope.account}.${op}` : `$MQG.admin.ping.${op}`;
  const replies = await admin.many(subject, body);
  if (replies.length === 0) throw noGateway(subject, options.timeout);
  return replies;
}
