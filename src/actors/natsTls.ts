import type { TlsOptions } from "@nats-io/transport-node";
import type { ClientTls } from "../config/schema.js";

/**
 * `nats.tls` as nats.js takes it, for every connection the gateway makes to NATS (its own,
 * the clients', the admin connection) and for `ctl`: a CA to trust, a client certificate.
 * Undefined when the config has none: `tls://` URLs then trust the system's CAs.
 */
export function natsTlsOptions(tls: ClientTls | null | undefined): TlsOptions | undefined {
  if (!tls) return undefined;
  return {
    ...(tls.ca_file ? { caFile: tls.ca_file } : {}),
    ...(tls.cert_file ? { certFile: tls.cert_file } : {}),
    ...(tls.key_file ? { keyFile: tls.key_file } : {}),
  };
}
