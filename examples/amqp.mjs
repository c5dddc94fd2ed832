#!/usr/bin/env node
// An AMQP 1.0 client in a few lines of rhea (the gateway's own AMQP library). An address
// is the NATS subject as is; bodies go as one data section, which NATS and MQTT clients
// read as the bytes themselves (docs/README.md):
//   node examples/amqp.mjs receive 'plant.>' [host:port]     prints "<subject> <body>" per message
//   node examples/amqp.mjs send plant.line1.temp 21.5 [host:port]
// Any AMQP 1.0 client does the same (qpid-proton, Azure's, RabbitMQ's AMQP 1.0 clients).
import rhea from "rhea";

const [verb, address, ...rest] = process.argv.slice(2);
const body = verb === "send" ? rest.shift() : undefined;
const [host = "127.0.0.1", port = "5672"] = (rest[0] ?? "").split(":").filter((s) => s !== "");
if ((verb !== "send" && verb !== "receive") || !address || (verb === "send" && body === undefined)) {
  console.error("usage: node examples/amqp.mjs receive ADDRESS [host:port] | send ADDRESS BODY [host:port]");
  process.exit(1);
}

const conn = rhea
  .create_container({ id: `amqp-example-${process.pid}` })
  .connect({ host, port: Number(port), reconnect: false });
conn.on("disconnected", (c) => {
  console.error(`disconnected: ${c.error?.message ?? conn.error?.description ?? "closed"}`);
  process.exit(1);
});

if (verb === "send") {
  // Unsettled: the gateway settles it once NATS has the message (or refuses it, with a reason).
  const sender = conn.open_sender(address);
  sender.once("sendable", () => sender.send({ body: rhea.message.data_section(Buffer.from(body)) }));
  sender.on("accepted", () => {
    console.error(`sent to ${address}: accepted`);
    conn.close();
    conn.removeAllListeners("disconnected");
  });
  sender.on("rejected", (c) => {
    console.error(`sent to ${address}: rejected (${c.delivery.remote_state?.error?.condition})`);
    process.exitCode = 1;
    conn.close();
    conn.removeAllListeners("disconnected");
  });
} else {
  // Presettled (snd_settle_mode 1): any address, wildcards included, served live from NATS.
  const receiver = conn.open_receiver({ source: { address }, snd_settle_mode: 1 });
  receiver.once("receiver_open", () => console.error(`receiving from ${address}`));
  receiver.on("receiver_close", (c) => {
    console.error(`refused: ${c.receiver.error?.condition} ${c.receiver.error?.description ?? ""}`);
    process.exit(1);
  });
  receiver.on("message", ({ message }) => {
    const b = message.body;
    const text = Buffer.isBuffer(b?.content)
      ? b.content.toString()
      : Buffer.isBuffer(b)
        ? b.toString()
        : JSON.stringify(b);
    console.log(`${message.to ?? address} ${text}`);
  });
}
