// How the gateway logs in to NATS (credentials) and how its listeners and NATS client use
// TLS, as the config file writes them; shared by several sections of schema.ts.
import * as z from "zod";
import type { Credentials, ServerTls } from "./schema.js";
import type { ListenAddress } from "./units.js";
import { listen, nonEmpty, path } from "./values.js";

export const credentials = z
  .strictObject({
    user: nonEmpty.optional(),
    password: nonEmpty.optional(),
    token: nonEmpty.optional(),
    creds_file: path.optional(),
    nkey_seed_file: path.optional(),
  })
  .superRefine((c, ctx) => {
    const ways = [c.user !== undefined || c.password !== undefined, c.token, c.creds_file, c.nkey_seed_file].filter(
      Boolean,
    ).length;
    if (ways === 0)
      ctx.addIssue({
        code: "custom",
        message: "needs user and password, token, creds_file or nkey_seed_file",
        input: c,
      });
    if (ways > 1)
      ctx.addIssue({
        code: "custom",
        message: "give one of user/password, token, creds_file or nkey_seed_file, not several",
        input: c,
      });
    if (c.user !== undefined && c.password === undefined)
      ctx.addIssue({ code: "custom", path: ["password"], message: "is needed with user", input: c });
    if (c.password !== undefined && c.user === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["user"],
        message: "is needed with password (a password alone is a token: use token)",
        input: c,
      });
    }
  })
  .transform((c): Credentials => {
    if (c.token !== undefined) return { kind: "token", token: c.token };
    if (c.creds_file !== undefined) return { kind: "creds", creds_file: c.creds_file };
    if (c.nkey_seed_file !== undefined) return { kind: "nkey", nkey_seed_file: c.nkey_seed_file };
    return { kind: "user", user: c.user ?? "", password: c.password ?? "" };
  });

export const clientTls = z
  .strictObject({ ca_file: path.optional(), cert_file: path.optional(), key_file: path.optional() })
  .superRefine(pairedKey);

export function serverTls(defaultListen: string) {
  return z
    .strictObject({
      listen: listen
        .prefault(defaultListen)
        .refine((l) => l !== null, "TLS needs an address; leave out tls to turn it off"),
      cert_file: path,
      key_file: path,
      ca_file: path.optional(),
      verify_clients: z.boolean().default(false),
    })
    .transform((t): ServerTls => ({ ...t, listen: t.listen as ListenAddress }));
}

function pairedKey(t: { cert_file?: string | undefined; key_file?: string | undefined }, ctx: z.RefinementCtx) {
  if (t.cert_file !== undefined && t.key_file === undefined)
    ctx.addIssue({ code: "custom", path: ["key_file"], message: "is needed with cert_file", input: t });
  if (t.key_file !== undefined && t.cert_file === undefined)
    ctx.addIssue({ code: "custom", path: ["cert_file"], message: "is needed with key_file", input: t });
}
