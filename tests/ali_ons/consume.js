'use strict';
// A push consumer of ali-ons (a RocketMQ 4.x client) printing one JSON line per message handled.
// Usage: node consume.js '<json options>'
//   {nameSrv, topic, group, expression?: '*' | 'A || B', sql?: '...', fromFirst?: bool,
//    fail?: {tag?: str, times?: n} (the handler throws), maxReconsumeTimes?, seconds?, until?: n messages,
//    accessKeyId?, accessKeySecret?, quiet?}
// It stops after `seconds`, or once `until` messages were handled, and prints {"done": n, "ms": first to last}.
const httpclient = require('urllib');
const { Consumer } = require('ali-ons');

async function main() {
  const o = JSON.parse(process.argv[2]);
  const consumer = new Consumer({
    httpclient,
    nameSrv: o.nameSrv,
    consumerGroup: o.group,
    accessKeyId: o.accessKeyId,
    accessKeySecret: o.accessKeySecret,
    consumeFromWhere: o.fromFirst === false ? 'CONSUME_FROM_LAST_OFFSET' : 'CONSUME_FROM_FIRST_OFFSET',
    rebalanceInterval: o.rebalanceMs || 2000,
    persistConsumerOffsetInterval: o.persistMs || 1000,
    heartbeatBrokerInterval: o.heartbeatMs || 5000,
    pollNameServerInteval: o.routeMs || 2000,
    maxReconsumeTimes: o.maxReconsumeTimes === undefined ? 16 : o.maxReconsumeTimes,
    pullBatchSize: o.pullBatchSize || 32,
    parallelConsumeLimit: o.parallel || 1,
  });
  consumer.on('error', err => {
    if (!o.quiet) console.error(`consumer error: ${err && err.message}`);
  });
  let handled = 0;
  let firstAt = 0;
  let lastAt = 0;
  const failed = new Map();
  const expression = o.sql ? { expressionType: 'SQL92', subString: o.sql } : (o.expression || '*');
  const finish = async () => {
    console.log(JSON.stringify({ done: handled, ms: lastAt - firstAt }));
    try { await consumer.close(); } catch (e) { /* closing */ }
    process.exit(0);
  };
  consumer.subscribe(o.topic, expression, async msg => {
    const key = msg.properties.UNIQ_KEY || msg.msgId;
    if (o.fail && (!o.fail.tag || msg.tags === o.fail.tag)) {
      const n = (failed.get(key) || 0) + 1;
      failed.set(key, n);
      console.log(JSON.stringify({ failed: n, body: msg.body.toString(), reconsumeTimes: msg.reconsumeTimes,
        topic: msg.topic, msgId: msg.msgId }));
      // thrown, not ACTION_RETRY: ali-ons' handler of %RETRY% messages drops the returned value
      if (!o.fail.times || n <= o.fail.times) throw new Error(`failing ${msg.msgId} on purpose`);
    }
    handled++;
    lastAt = Date.now();
    if (!firstAt) firstAt = lastAt;
    if (!o.quiet) {
      console.log(JSON.stringify({ body: msg.body.toString(), tags: msg.tags, keys: msg.keys, msgId: msg.msgId,
        queueId: msg.queueId, queueOffset: msg.queueOffset, topic: msg.topic, properties: msg.properties,
        reconsumeTimes: msg.reconsumeTimes }));
    }
    if (o.until && handled >= o.until) setImmediate(finish);
  });
  await consumer.ready();
  console.log(JSON.stringify({ ready: true }));
  if (o.seconds) setTimeout(finish, o.seconds * 1000);
}

main().catch(err => { console.error(err && err.stack || err); process.exit(1); });
