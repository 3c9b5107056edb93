// A spout: emits (n, line) for each line of a text file, with message id n; replays a
// line whose tree failed; forgets a line whose tree completed. Syncs after each
// command; with nothing to emit it waits a little before its sync.
//
// The file is the first argument, else GALE_LINES_FILE; the second argument, else
// GALE_LINES_MAX, bounds how many lines are read.
'use strict';
const fs = require('fs');
const path = require('path');

const file = process.argv[2] || process.env.GALE_LINES_FILE;
const max = parseInt(process.argv[3] || process.env.GALE_LINES_MAX || '0', 10);
let lines = fs.readFileSync(file, 'utf8').split('\n');
if (max > 0) lines = lines.slice(0, max);

let next = 0;          // the next line never emitted
const replay = [];     // failed lines to emit again
const pending = new Set();

function send(message) {
  process.stdout.write(JSON.stringify(message) + '\nend\n');
}

function emit(n) {
  pending.add(n);
  send({command: 'emit', id: n, tuple: [n, lines[n]]});
}

function onMessage(m) {
  if (Array.isArray(m)) return; // the task ids of an emit
  if (m.pidDir !== undefined) { // the handshake
    fs.writeFileSync(path.join(m.pidDir, String(process.pid)), '');
    send({pid: process.pid});
    return;
  }
  switch (m.command) {
    case 'next':
      if (replay.length > 0) {
        emit(replay.shift());
      } else if (next < lines.length) {
        emit(next++);
      } else {
        setTimeout(() => send({command: 'sync'}), 5); // nothing to do: wait a little
        return;
      }
      break;
    case 'ack':
      pending.delete(m.id);
      break;
    case 'fail':
      if (pending.has(m.id)) replay.push(m.id);
      break;
    case 'activate':
    case 'deactivate':
      break;
    default:
      send({command: 'log', msg: 'unknown command ' + JSON.stringify(m), level: 3});
  }
  send({command: 'sync'});
}

// Read lines; a message is the lines before a line "end".
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
