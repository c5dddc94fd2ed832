import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl. */
export function makeCertificates(): {
  dir: string;
  ca: string;
  cert: string;
  key: string;
  clientCert: string;
  clientKey: string;
} {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-tls-"));
  const f = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });
  ssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=mqgw-test-ca",
    "-keyout",
    f("ca.key"),
    "-out",
    f("ca.pem"),
  );
  for (const [name, cn, ext] of [
    ["server", "127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
    ["client", "device-1", "extendedKeyUsage=clientAuth"],
  ] as const) {
    ssl(
      "req",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-subj",
      `/CN=${cn}`,
      "-keyout",
      f(`${name}.key`),
      "-out",
      f(`${name}.csr`),
    );
    execFileSync("bash", ["-c", `printf '%s\\n' '${ext}' > ${f(`${name}.ext`)}`]);
    ssl(
      "x509",
      "-req",
      "-in",
      f(`${name}.csr`),
      "-CA",
      f("ca.pem"),
      "-CAkey",
      f("ca.key"),
      "-CAcreateserial",
      "-days",
      "2",
      "-extfile",
      f(`${name}.ext`),
      "-out",
      f(`${name}.pem`),
    );
  }
  return {
    dir,
    ca: f("ca.pem"),
    cert: f("server.pem"),
    key: f("server.key"),
    clientCert: f("client.pem"),
    clientKey: f("client.key"),
  };
}
