// A spout for BenchmarkNodeSpout: emits (n) with message id n for n in 0..N-1
// (N from GALE_COUNT_N), one per next; then, with nothing to emit, waits a little
// before its sync. Acks and fails are answered with a sync and nothing else.
'use strict';
const fs = require('fs');
const path = require('path');

const max = parseInt(process.env.GALE_COUNT_N || '0', 10);
let next = 0;

function send(message) {
  process.stdout.write(JSON.stringify(message) + '\nend\n');
}

function onMessage(m) {
  if (Array.isArray(m)) return; // the task ids of an emit
  if (m.pidDir !== undefined) { // the handshake
    fs.writeFileSync(path.join(m.pidDir, String(process.pid)), '');
    send({pid: process.pid});
    return;
  }
  if (m.command === 'next') {
    if (next < max) {
      send({command: 'emit', id: next, tuple: [next]});
      next++;
    } else {
      setTimeout(() => send({command: 'sync'}), 5);
      return;
    }
  }
  send({command: 'sync'});
}

let buffered = '';
let message = [];
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  let i;
  while ((i = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, i);
    buffered = buffered.slice(i + 1);
    if (line === 'end') {
      const m = JSON.parse(message.join('\n'));
      message = [];
      onMessage(m);
    } else {
      message.push(line);
    }
  }
});
process.stdin.on('end', () => process.exit(0));
