// The ban list every door asks at CONNECT / open (src/actors/admin/banList.ts): what a ban
// of each kind matches, and that an expired ban stops matching at its `until`.
import { describe, expect, it } from "vitest";
import { addressBlock, type Ban, BanList, banKey, hostOf } from "../../src/actors/admin/banList.js";

const since = new Date().toISOString();
const ban = (kind: Ban["kind"], value: string, extra: Partial<Ban> = {}): [string, Ban] => [
  banKey(kind, value),
  { kind, value, since, ...extra },
];

describe("bans", () => {
  it("a client id, a username or an address each match only what they name", () => {
    const list = new BanList();
    for (const [key, b] of [
      ban("client_id", "bad/1"),
      ban("username", "ann", { reason: "flood" }),
      ban("address", "10.1.0.0/16"),
      ban("address", "2001:db8::/32"),
    ])
      list.set(key, b);
    expect(list.refusal({ clientId: "bad/1", remote: "127.0.0.1:5000" })).toBe('banned (client id "bad/1")');
    expect(list.refusal({ clientId: "bad/2", username: "ann", remote: "127.0.0.1:5000" })).toBe(
      'banned (username "ann": flood)',
    );
    expect(list.refusal({ clientId: "x", remote: "10.1.255.3:1" })).toBe("banned (address 10.1.0.0/16)");
    expect(list.refusal({ clientId: "x", remote: "[::ffff:10.1.2.3]:1" })).toBe("banned (address 10.1.0.0/16)");
    expect(list.refusal({ clientId: "x", remote: "[2001:db8::7]:1883" })).toBe("banned (address 2001:db8::/32)");
    expect(list.refusal({ clientId: "x", username: "bob", remote: "10.2.0.1:1" })).toBeUndefined();
    expect(list.refusal({ clientId: "", remote: "" })).toBeUndefined();
  });

  it("an expired ban stops matching; an unban (set to undefined) at once", () => {
    const list = new BanList();
    const [key, past] = ban("client_id", "old", { until: new Date(Date.now() - 1).toISOString() });
    list.set(key, past);
    expect(list.refusal({ clientId: "old", remote: "1.2.3.4:1" })).toBeUndefined();
    expect(list.inForce()).toEqual([]);
    const [k2, b2] = ban("client_id", "now", { until: new Date(Date.now() + 60_000).toISOString() });
    list.set(k2, b2);
    expect(list.refusal({ clientId: "now", remote: "1.2.3.4:1" })).toMatch(/^banned \(client id "now" until /);
    list.set(k2, undefined);
    expect(list.refusal({ clientId: "now", remote: "1.2.3.4:1" })).toBeUndefined();
  });

  it("tells listeners of each ban in force, not of expired ones", () => {
    const list = new BanList();
    const heard: string[] = [];
    list.onBan((b) => heard.push(b.value));
    list.set(...ban("client_id", "a"));
    list.set(...ban("client_id", "b", { until: new Date(Date.now() - 1).toISOString() }));
    expect(heard).toEqual(["a"]);
  });

  it("reads addresses and CIDR blocks, and says what is wrong with a bad one", () => {
    expect(hostOf("127.0.0.1:1883")).toBe("127.0.0.1");
    expect(hostOf("[::1]:1883")).toBe("::1");
    expect(hostOf("[::ffff:192.168.1.2]:9")).toBe("192.168.1.2");
    expect(typeof addressBlock("192.168.0.0/24")).toBe("object");
    expect(typeof addressBlock("::1")).toBe("object");
    expect(addressBlock("192.168.0.0/40")).toMatch(/prefix length must be 0 to 32/);
    expect(addressBlock("host.example")).toMatch(/not an IP address or CIDR block/);
    expect(addressBlock("10.0.0.0/8/1")).toMatch(/not an IP address/);
  });
});
