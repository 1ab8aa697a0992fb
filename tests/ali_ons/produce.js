'use strict';
// Sends messages with ali-ons (a RocketMQ 4.x client) and prints one JSON line per send.
// Usage: node produce.js '<json options>'
//   {nameSrv, topic, count, tags?: [..] (cycled), keys?: bool, body?: prefix, group?, properties?: {..},
//    accessKeyId?, accessKeySecret?, delayLevel?, bytes?}
const httpclient = require('urllib');
const { Producer, Message } = require('ali-ons');

async function main() {
  const o = JSON.parse(process.argv[2]);
  const producer = new Producer({
    httpclient,
    nameSrv: o.nameSrv,
    producerGroup: o.group || 'ALI_ONS_PRODUCER',
    accessKeyId: o.accessKeyId,
    accessKeySecret: o.accessKeySecret,
    persistent: false,
  });
  await producer.ready();
  const started = Date.now();
  for (let i = 0; i < o.count; i++) {
    const tag = o.tags ? o.tags[i % o.tags.length] : null;
    const body = o.bytes ? Buffer.alloc(o.bytes, 'x') : `${o.body || 'm'}-${i}`;
    const msg = new Message(o.topic, tag, body);
    if (o.keys) msg.keys = [`key-${i}`];
    for (const [k, v] of Object.entries(o.properties || {})) msg.properties[k] = String(v).replace('{i}', i);
    if (o.delayLevel) msg.delayTimeLevel = o.delayLevel;
    const r = await producer.send(msg);
    if (!o.quiet) {
      console.log(JSON.stringify({ i, msgId: r.msgId, queueId: r.messageQueue.queueId,
        brokerName: r.messageQueue.brokerName, queueOffset: r.queueOffset, status: r.sendStatus, tag }));
    }
  }
  console.log(JSON.stringify({ done: o.count, ms: Date.now() - started }));
  await producer.close();
  process.exit(0);
}

main().catch(err => { console.error(err && err.stack || err); process.exit(1); });
