// mpiws live dashboard: the browser side of /dashboard/.
//
// It reads the state document from /dashboard/api/events (a server-sent event
// stream read with fetch(), since EventSource cannot send an Authorization
// header) and redraws the page from each document. No framework, no build
// step; everything is built with DOM APIs and textContent, never innerHTML,
// so nothing in a state document can become markup. The page runs under a
// strict CSP: no inline script or style attributes (styles set through
// el.style, the CSSOM, are allowed), no eval.
//
// Hooks for tests (stable ids, classes, data attributes). Elements are patched
// in place, not rebuilt, so a reference to a row or cell stays valid across
// updates while its item is still in the document.
//   body[data-updated]                 count of state documents rendered (grows by
//                                      one per document: the snapshot, then each event)
//   #status[data-state]                "live" | "reconnecting" | "key"
//                                      ("reconnecting" also while first connecting)
//   #key-prompt, #key-input, #key-connect, #key-error, #forget-key
//   #endpoint-url, #endpoint-version, #as-of, #empty (shown when nothing to show)
//   #tabs .tab[data-tab=endpoint|domains|workflows|farms][aria-selected=true|false]
//                                      hidden while its part is absent: endpoint and
//                                      domains follow those keys (an empty domain list
//                                      keeps its tab); workflows/farms appear with the
//                                      first run of that kind and then stay
//   #tab-endpoint, #tab-domains, #tab-workflows, #tab-farms   (the panels)
//   #endpoint-services li[data-service]
//   #endpoint-programs li[data-program][data-kind]
//   #endpoint-process [data-field=pid|cpu_seconds|rss_bytes|instances|jobs]
//   #endpoint-instances tbody tr[data-domain][data-rank][data-state]
//   #endpoint-jobs tbody tr.job[data-job][data-state]
//       details.stdout-details > pre.stdout    (only when there is output)
//   #endpoint-limits .limit[data-limit=NAME][data-used][data-bound] .bar-fill
//   .domain[data-domain=ID][data-size]
//     .failure[data-rank=N][data-state]     one per failed/unreachable rank
//     .rank-row[data-rank=N][data-state=STATE]
//       td.sent[data-sent-messages][data-sent-bytes]          totals; "" if unknown
//       td.received[data-received-messages][data-received-bytes]
//       td.waits                            what the rank waits for, in words
//       td.error
//     .matrix[data-mode=messages|bytes]
//       td.cell[data-from=I][data-to=J][data-messages][data-bytes]
//                                           (no data-messages/bytes: unknown)
//     .matrix-mode button[data-mode=messages|bytes][aria-pressed]
//   #tooltip                                the matrix cell under the mouse, in words
//   .workflow[data-name=NAME][data-state]
//     .run-error                            the run's error, if any
//     .step[data-step=NAME][data-state=STATE]   both the SVG <g> and the <tr>
//     svg path.edge[data-from][data-to]
//     [data-field=direct_bytes], [data-field=manager_bytes]   (human-readable)
//   .farm[data-name=NAME][data-state]
//     [data-field=workers|workers_lost|tasks_done|tasks_submitted|
//      tasks_failed|tasks_resubmitted|tasks_per_second|
//      batch_last|batch_mean|batch_max]    the number as text, no separators
//     svg.sparkline                         tasks per second over updates
// (data-key attributes are the patcher's, not hooks.)
'use strict';

const KEY_NAME = 'mpiws-dashboard-key';
const TAB_NAME = 'mpiws-dashboard-tab';
const API_STATE = 'api/state';    // relative: the page is served at /dashboard/
const API_EVENTS = 'api/events';
const SILENCE_MS = 45000;       // no byte (not even a keepalive) for this long: reconnect
const SPARK_POINTS = 120;       // tasks-per-second history kept per farm
const MATRIX_MAX = 128;         // ranks drawn in a traffic matrix (the DOM grows as n²)

// Client-side memory that outlives one state document.
const ui = {
  doc: null,
  rendered: 0,
  tab: sessionStorage.getItem(TAB_NAME) || 'endpoint',
  openJobs: new Set(),          // jobs whose stdout <details> the reader opened
  matrixMode: new Map(),        // domain -> "messages" | "bytes"
  hover: null,                  // the matrix cell under the mouse, to refresh the tooltip
  firstSeen: new Map(),         // "domain/rank/state" -> Date first seen, for failures
  farmHistory: new Map(),       // farm name -> [{updated, tps}]
  seenRuns: new Set(),          // "workflows", "farms": kinds of run seen, whose tabs stay
};

// Connection state: one stream at a time.
const conn = { abort: null, timer: null, backoff: 0 };

// ---------- small helpers ----------

const $ = (sel, root = document) => root.querySelector(sel);

// Build an element: attrs go through setAttribute/dataset, children are nodes or text.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  for (const c of children.flat()) {
    if (c == null) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') node.setAttribute('class', v);
    else if (k === 'text') node.textContent = v;
    else if (k === 'data') for (const [dk, dv] of Object.entries(v)) { if (dv != null) node.dataset[dk] = dv; }
    else node.setAttribute(k, v === true ? '' : v);
  }
}

const isNum = (x) => typeof x === 'number' && Number.isFinite(x);
const count = (n) => (isNum(n) ? n.toLocaleString('en-US') : '—');

function bytes(n) {
  if (!isNum(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
}

function seconds(s) {
  if (!isNum(s)) return '—';
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

const pct = (used, bound) => (isNum(used) && isNum(bound) && bound > 0 ? (100 * used) / bound : null);
const asList = (x) => (Array.isArray(x) ? x : []);
const short = (id) => (typeof id === 'string' && id.length > 12 ? `${id.slice(0, 8)}…` : String(id ?? '—'));

// A coloured state badge; colours live in app.css under .state-NAME.
const badge = (state) => el('span', { class: `badge state-${state || 'unknown'}` }, state || 'unknown');

// A table body from rows, or one "none" row, so empty tables say so.
function fillBody(tbody, rows, cols) {
  patch(tbody, rows.length ? rows : [el('tr', { class: 'none' }, el('td', { colspan: cols }, 'none'))]);
}

// ---------- patching the live DOM ----------
// Each document is drawn as a fresh tree, then morphed into the page: nodes that
// match (same tag, same data-key) are kept and updated in place. So elements a
// reader (or a Selenium test) holds keep their identity across updates, as do
// hover, focus, selection and open <details>. Listeners are delegated to the
// document (see init), since a kept node keeps its old listeners.

function patch(parent, nodes) {
  const fresh = document.createDocumentFragment();
  fresh.append(...nodes.filter((n) => n != null));
  morphChildren(parent, fresh);
}

const keyOf = (n) => (n.nodeType === 1 ? n.getAttribute('data-key') : null);
const sameKind = (a, b) => a.nodeType === b.nodeType && a.nodeName === b.nodeName
  && a.namespaceURI === b.namespaceURI && keyOf(a) === keyOf(b);

function morph(old, next) {
  if (old.nodeType !== 1) {
    if (old.nodeValue !== next.nodeValue) old.nodeValue = next.nodeValue;
    return;
  }
  // A <details>' open is the reader's: never undo a click that a redraw raced.
  const mine = (name) => name === 'open' && old.nodeName === 'DETAILS';
  for (const { name } of [...old.attributes]) if (!next.hasAttribute(name) && !mine(name)) old.removeAttribute(name);
  for (const { name, value } of next.attributes) {
    if (old.getAttribute(name) === value || mine(name)) continue;
    // A style attribute may only be copied through the CSSOM under the CSP.
    if (name === 'style') old.style.cssText = next.style.cssText; else old.setAttribute(name, value);
  }
  morphChildren(old, next);
}

function morphChildren(oldParent, newParent) {
  const byKey = new Map();
  for (const c of oldParent.childNodes) if (keyOf(c)) byKey.set(keyOf(c), c);
  let cur = oldParent.firstChild;
  for (const n of [...newParent.childNodes]) {
    const k = keyOf(n);
    const match = k ? byKey.get(k) : cur && !keyOf(cur) && sameKind(cur, n) ? cur : null;
    if (match && sameKind(match, n)) {
      byKey.delete(k);
      if (match === cur) cur = cur.nextSibling; else oldParent.insertBefore(match, cur);
      morph(match, n);
    } else {
      oldParent.insertBefore(n, cur);
    }
  }
  while (cur) {
    const next = cur.nextSibling;
    cur.remove();
    cur = next;
  }
}

// ---------- key and connection ----------

function showPrompt(message) {
  stopStream();
  clearView();
  setStatus('key', 'key needed');
  $('#main').hidden = true;
  $('#forget-key').hidden = true;
  $('#key-prompt').hidden = false;
  const err = $('#key-error');
  err.hidden = !message;
  err.textContent = message || '';
  $('#key-input').value = '';
  $('#key-input').focus();
}

function submitKey(ev) {
  if (ev) ev.preventDefault();
  const key = $('#key-input').value.trim();
  if (!key) return;
  sessionStorage.setItem(KEY_NAME, key);
  $('#key-prompt').hidden = true;
  $('#forget-key').hidden = false;
  connect(true);
}

function forgetKey() {
  sessionStorage.removeItem(KEY_NAME);
  showPrompt('');
}

// Drop what was shown, so a screen left at the key prompt keeps no data the key unlocked.
function clearView() {
  ui.doc = null;
  ui.hover = null;
  ui.seenRuns.clear();
  for (const id of ['#tab-domains', '#tab-workflows', '#tab-farms', '#endpoint-services', '#endpoint-programs',
    '#endpoint-process', '#endpoint-limits', '#endpoint-instances tbody', '#endpoint-jobs tbody']) $(id).replaceChildren();
  document.body.classList.remove('stale');
  for (const id of ['#endpoint-url', '#endpoint-version', '#as-of']) $(id).textContent = '';
  $('#tooltip').hidden = true;
}

function setStatus(state, label, detail) {
  const s = $('#status');
  s.dataset.state = state;
  $('.label', s).textContent = label;
  s.title = detail || '';
  document.body.classList.toggle('stale', state === 'reconnecting' && ui.doc != null);
}

function stopStream() {
  if (conn.abort) conn.abort.abort();
  conn.abort = null;
  clearTimeout(conn.timer);
  conn.timer = null;
}

// Open the stream; on an end or failure try again after 1, 2, 4, 8, 10, 10... s.
function connect(first) {
  stopStream();
  const key = sessionStorage.getItem(KEY_NAME);
  if (!key) return showPrompt('');
  setStatus('reconnecting', first ? 'connecting…' : 'reconnecting…');
  const ctl = new AbortController();
  conn.abort = ctl;
  // retry() ignores a connection that was replaced or given up (key refused, forgotten).
  readStream(key, ctl).then(
    () => retry(ctl, ctl.silent ? 'the stream went silent' : 'the stream ended'),
    (err) => retry(ctl, ctl.silent ? 'the stream went silent' : String((err && err.message) || err)),
  );
}

function retry(ctl, why) {
  if (conn.abort !== ctl) return;
  conn.abort = null;
  const wait = Math.min(10000, 1000 * 2 ** conn.backoff);
  conn.backoff = Math.min(conn.backoff + 1, 4);
  setStatus('reconnecting', `reconnecting in ${wait / 1000} s…`, why);
  conn.timer = setTimeout(() => connect(false), wait);
}

// GET an API path with the key. A refused key (401/403) is not a connection
// failure: forget it, ask again with the server's words, and return null.
async function apiFetch(path, key, ctl, accept) {
  const res = await fetch(path, { headers: { Authorization: `Bearer ${key}`, Accept: accept }, cache: 'no-store', signal: ctl.signal });
  if (res.status === 401 || res.status === 403) {
    const text = await errorText(res);
    if (conn.abort !== ctl) return null;      // replaced or forgotten meanwhile
    sessionStorage.removeItem(KEY_NAME);
    showPrompt(text);
    return null;
  }
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await errorText(res)}`);
  return res;
}

async function readStream(key, ctl) {
  // A snapshot first: the page fills at once, even where a proxy holds the stream back.
  const snap = await apiFetch(API_STATE, key, ctl, 'application/json');
  if (!snap) return;
  const doc = await snap.json();
  if (conn.abort !== ctl) return;
  render(doc);

  const res = await apiFetch(API_EVENTS, key, ctl, 'text/event-stream');
  if (!res) return;
  if (!res.body) throw new Error('the browser cannot read a streamed response');

  // A silent stream (a proxy buffering it, a dead peer) looks open forever: watch it.
  let watchdog = null;
  const alive = () => {
    clearTimeout(watchdog);
    watchdog = setTimeout(() => { ctl.silent = true; ctl.abort(); }, SILENCE_MS);
  };
  alive();
  const parser = sseParser((type, data) => {
    if ((type !== 'state' && type !== 'message') || conn.abort !== ctl) return;
    let doc;
    try { doc = JSON.parse(data); } catch (e) { console.warn('mpiws: a state event is not JSON', e); return; }
    conn.backoff = 0;
    setStatus('live', 'live');
    render(doc);
  });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      alive();
      parser(decoder.decode(value, { stream: true }));
    }
  } finally {
    clearTimeout(watchdog);
  }
}

// The server's error text: the `error` field of its JSON body, or the body.
async function errorText(res) {
  let text = '';
  try { text = await res.text(); } catch (_) { /* body unreadable: fall back to the status */ }
  try {
    const body = JSON.parse(text);
    if (body && typeof body.error === 'string') return body.error;
  } catch (_) { /* not JSON: show it as it is */ }
  return text.trim() || `${res.status} ${res.statusText}`;
}

// An incremental text/event-stream parser: feed it decoded chunks, it calls
// onEvent(type, data) per event. Lines end in \n, \r\n or \r; a \r at the end
// of a chunk is held back, since its \n may come in the next one.
function sseParser(onEvent) {
  let buf = '';
  let type = '';
  let data = [];
  return (chunk) => {
    buf += chunk;
    const lines = buf.split(/\r\n|\n|\r(?!$)/);
    buf = lines.pop();
    for (const line of lines) {
      if (line === '') {
        if (data.length) onEvent(type || 'message', data.join('\n'));
        type = '';
        data = [];
      } else if (line[0] === ':') {
        // a comment, e.g. a keepalive
      } else {
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        let value = i < 0 ? '' : line.slice(i + 1);
        if (value[0] === ' ') value = value.slice(1);
        if (field === 'event') type = value;
        else if (field === 'data') data.push(value);
      }
    }
  };
}

// ---------- rendering: the whole page from one document ----------

// A new state document: remember it, note farm rates, draw, count it.
function render(doc) {
  ui.doc = doc && typeof doc === 'object' ? doc : {};
  for (const run of asList(ui.doc.runs)) if (run && run.kind === 'farm') recordFarm(run, run.doc || {});
  draw();
  ui.rendered += 1;
  document.body.dataset.updated = String(ui.rendered);
}

// Redraw everything from ui.doc; also used when the reader switches a tab or a
// toggle, which is not a new document. Each part is built afresh and patched
// into the page (a 64-rank matrix is 4096 cells: a few milliseconds); what the
// reader chose (tab, open stdout, matrix mode) lives in `ui`.
function draw() {
  const ep = ui.doc.endpoint || null;
  const domains = asList(ui.doc.domains);
  const runs = asList(ui.doc.runs);
  const workflows = runs.filter((r) => r && r.kind === 'workflow');
  const farms = runs.filter((r) => r && r.kind === 'farm');

  renderHeader(ep);
  $('#main').hidden = false;
  $('#forget-key').hidden = false;
  $('#key-prompt').hidden = true;

  // A tab shows when its part is in the document. Domains come and go on any
  // endpoint, so that tab stays while the list is there, even empty; a kind of
  // run, once seen, keeps its tab, so a reader is never thrown off the page.
  if (workflows.length) ui.seenRuns.add('workflows');
  if (farms.length) ui.seenRuns.add('farms');
  const present = { endpoint: !!ep, domains: Array.isArray(ui.doc.domains),
    workflows: ui.seenRuns.has('workflows'), farms: ui.seenRuns.has('farms') };
  if (ep) renderEndpoint(ep);
  renderDomains(domains);
  renderWorkflows(workflows);
  renderFarms(farms);
  showTabs(present, { domains: domains.length, workflows: workflows.length, farms: farms.length });
  refreshTooltip();
}

function renderHeader(ep) {
  $('#endpoint-url').textContent = ep && ep.url ? ep.url : location.origin;
  $('#endpoint-version').textContent = ep && ep.mpiws ? `mpiws ${ep.mpiws}` : '';
  const when = ep && isNum(ep.now) ? new Date(ep.now * 1000) : new Date();
  $('#as-of').textContent = `as of ${when.toLocaleTimeString()}`;
}

// Show the tabs that have data; keep the reader's choice if it is still there.
function showTabs(present, counts) {
  const names = Object.keys(present);
  if (!present[ui.tab]) ui.tab = names.find((n) => present[n]) || 'endpoint';
  for (const name of names) {
    const button = $(`#tabs .tab[data-tab="${name}"]`);
    button.hidden = !present[name];
    button.setAttribute('aria-selected', String(name === ui.tab));
    const c = $('.count', button);
    if (c) c.textContent = counts[name] ? String(counts[name]) : '';
    $(`#tab-${name}`).hidden = !(present[name] && name === ui.tab);
  }
  $('#empty').hidden = names.some((n) => present[n]);
}

function selectTab(name) {
  ui.tab = name;
  sessionStorage.setItem(TAB_NAME, name);
  ui.hover = null;
  $('#tooltip').hidden = true;
  if (ui.doc) draw();
}

// ---------- endpoint ----------

function renderEndpoint(ep) {
  const none = el('li', { class: 'muted' }, 'none deployed');
  const services = asList(ep.services).map((s) => el('li', { class: 'chip', data: { service: s, key: s } }, s));
  patch($('#endpoint-services'), services.length ? services : [none]);
  const programs = asList(ep.programs).map((p) => el('li', { class: 'chip', data: { program: p.name, kind: p.kind, key: p.name } },
    p.name, p.kind ? el('span', { class: 'chip-kind' }, p.kind) : null));
  patch($('#endpoint-programs'), programs.length ? programs : [none.cloneNode(true)]);

  const p = ep.process || {};
  patch($('#endpoint-process'), [
    figure('PID', p.pid ?? '—', 'pid'),
    figure('CPU time', seconds(p.cpu_seconds), 'cpu_seconds'),
    figure('Memory (RSS)', bytes(p.rss_bytes), 'rss_bytes'),
    Array.isArray(ep.instances) ? figure('Instances', count(ep.instances.length), 'instances') : null,
    Array.isArray(ep.jobs) ? figure('Jobs', count(ep.jobs.length), 'jobs') : null,
  ]);

  fillBody($('#endpoint-instances tbody'), asList(ep.instances).map(instanceRow), 9);
  fillBody($('#endpoint-jobs tbody'), asList(ep.jobs).map(jobRow), 7);
  const limits = asList(ep.limits);
  patch($('#endpoint-limits'), limits.length ? limits.map(limitRow) : [el('p', { class: 'muted' }, 'no limits reported')]);

  // A part the document leaves out is hidden; a part that is there but empty says "none".
  const has = (k) => ep[k] != null;
  showCard('#endpoint-services', has('services') || has('programs'));
  showCard('#endpoint-process', has('process'));
  showCard('#endpoint-limits', has('limits'));
  showCard('#endpoint-instances', has('instances'));
  showCard('#endpoint-jobs', has('jobs'));
}

function showCard(sel, present) {
  $(sel).closest('.card').hidden = !present;
}

function instanceRow(i) {
  return el('tr', { data: { domain: i.domain, rank: i.rank, state: i.state, key: `${i.domain}/${i.rank}` } },
    el('td', { class: 'mono', title: i.domain }, short(i.domain)),
    el('td', {}, `${i.rank ?? '—'}${isNum(i.size) ? ` / ${i.size}` : ''}`),
    el('td', {}, i.service ?? '—'),
    el('td', {}, badge(i.state)),
    el('td', { class: 'num' }, seconds(i.age_seconds)),
    el('td', { class: 'num' }, i.pid ?? '—'),
    el('td', { class: 'num' }, seconds(i.cpu_seconds)),
    el('td', { class: 'num' }, bytes(i.rss_bytes)),
    el('td', {}, i.isolated == null ? '—' : i.isolated ? 'yes' : 'no'));
}

function jobRow(j) {
  // Open if the reader opened it (the toggle listener in init keeps ui.openJobs).
  const details = j.stdout_tail
    ? el('details', { class: 'stdout-details', open: ui.openJobs.has(j.id) },
      el('summary', {}, `last ${j.stdout_tail.split('\n').length} lines`),
      el('pre', { class: 'stdout' }, j.stdout_tail))
    : el('span', { class: 'muted' }, 'no output');
  const files = asList(j.files);
  return el('tr', { class: 'job', data: { job: j.id, state: j.state, key: j.id } },
    el('td', { class: 'mono', title: j.id }, short(j.id)),
    el('td', {}, j.program ?? '—'),
    el('td', {}, badge(j.state)),
    el('td', { class: 'num' }, seconds(j.runtime_seconds)),
    el('td', { class: 'num' }, bytes(j.disk_bytes)),
    el('td', {}, files.length ? el('ul', { class: 'files' }, files.map((f) => el('li', { class: 'mono' }, f))) : '—'),
    el('td', { class: 'stdout-cell' }, details));
}

function limitRow(l) {
  const show = l.unit === 'bytes' ? bytes : count;
  const p = pct(l.used, l.bound);
  const fill = el('div', { class: 'bar-fill' });
  fill.style.width = `${Math.min(100, p ?? 0)}%`;
  const level = p == null ? '' : p >= 90 ? 'high' : p >= 75 ? 'warn' : '';
  return el('div', { class: `limit ${level}`, data: { limit: l.name, used: l.used, bound: l.bound, key: l.name } },
    el('div', { class: 'limit-name' }, l.name, l.flag ? el('span', { class: 'flag mono' }, l.flag) : null),
    el('div', { class: 'bar' }, fill),
    el('div', { class: 'limit-value' }, `${show(l.used)} / ${l.bound == null ? 'unbounded' : show(l.bound)}`,
      p == null ? null : el('span', { class: 'muted' }, ` ${p.toFixed(p < 10 ? 1 : 0)}%`)));
}

function figure(label, value, field) {
  return el('div', { class: 'figure' }, el('dt', {}, label), el('dd', { data: { field } }, value));
}

// ---------- domains ----------

function renderDomains(domains) {
  patch($('#tab-domains'), domains.length ? domains.map(domainPanel) : [el('p', { class: 'empty' }, 'No domain here right now.')]);
}

function domainPanel(d) {
  const ranks = asList(d.ranks).filter((r) => r && isNum(r.rank) && r.rank >= 0).sort((a, b) => a.rank - b.rank);
  const states = {};
  for (const r of ranks) states[r.state] = (states[r.state] || 0) + 1;
  return el('section', { class: 'card domain', data: { domain: d.domain, size: d.size, key: d.domain } },
    el('header', { class: 'panel-head' },
      el('h2', {}, 'Domain ', el('span', { class: 'mono', title: d.domain }, short(d.domain))),
      el('span', { class: 'muted' }, `${d.service ?? ''} · ${d.size ?? ranks.length} ranks`
        + (isNum(d.shown) && isNum(d.size) && d.shown < d.size ? ` (the first ${d.shown} asked)` : '')),
      el('span', { class: 'state-summary' }, Object.entries(states).map(([s, n]) => el('span', {}, badge(s), ` ${n}`)))),
    failureList(d, ranks),
    el('div', { class: 'domain-body' },
      el('div', { class: 'scroll-x ranks-wrap' }, rankTable(ranks)),
      trafficMatrix(d, ranks)));
}

// Failed and unreachable ranks first, with when this page first saw them.
function failureList(d, ranks) {
  const bad = ranks.filter((r) => r.state === 'failed' || r.state === 'unreachable');
  if (!bad.length) return null;
  return el('ul', { class: 'failures' }, bad.map((r) => {
    const key = `${d.domain}/${r.rank}/${r.state}`;
    if (!ui.firstSeen.has(key)) ui.firstSeen.set(key, new Date());
    return el('li', { class: `failure state-${r.state}`, data: { rank: r.rank, state: r.state, key: r.rank } },
      el('strong', {}, `rank ${r.rank} ${r.state}`), r.error ? `: ${r.error}` : '',
      el('span', { class: 'muted when' }, ` seen ${ui.firstSeen.get(key).toLocaleTimeString()}`));
  }));
}

// Sum a [[messages, bytes], ...] list; null when unknown.
function totals(pairs) {
  if (!Array.isArray(pairs)) return null;
  let m = 0, b = 0;
  for (const p of pairs) if (Array.isArray(p)) { m += p[0] || 0; b += p[1] || 0; }
  return [m, b];
}

function rankTable(ranks) {
  const rows = ranks.map((r) => {
    const s = totals(r.sent);
    const rc = totals(r.received);
    return el('tr', { class: 'rank-row', data: { rank: r.rank, state: r.state, key: r.rank } },
      el('td', { class: 'num' }, r.rank),
      el('td', { class: 'mono url' }, r.url ?? '—'),
      el('td', {}, badge(r.state)),
      // The hooks are always there; empty when the rank did not report (unreachable).
      el('td', { class: 'num sent', data: { sentMessages: s ? s[0] : '', sentBytes: s ? s[1] : '' } },
        s ? `${count(s[0])} · ${bytes(s[1])}` : '—'),
      el('td', { class: 'num received', data: { receivedMessages: rc ? rc[0] : '', receivedBytes: rc ? rc[1] : '' } },
        rc ? `${count(rc[0])} · ${bytes(rc[1])}` : '—'),
      el('td', { class: 'waits' }, waitsFor(r.awaiting)),
      el('td', { class: 'error', title: r.error ?? '' }, r.error ?? ''));
  });
  const table = el('table', { class: 'data ranks' },
    el('thead', {}, el('tr', {},
      el('th', { class: 'num' }, 'Rank'), el('th', {}, 'Endpoint'), el('th', {}, 'State'),
      el('th', { class: 'num' }, 'Sent', el('span', { class: 'sub' }, 'msgs · bytes')),
      el('th', { class: 'num' }, 'Received', el('span', { class: 'sub' }, 'msgs · bytes')),
      el('th', {}, 'Waits for'), el('th', {}, 'Error'))),
    el('tbody'));
  fillBody($('tbody', table), rows, 7);
  return table;
}

// What a rank is blocked on, in words: "from rank 1, tag 7", "allreduce (from rank 1)".
function waitsFor(awaiting) {
  if (awaiting == null) return 'unknown';
  if (!awaiting.length) return '—';
  return awaiting.map((w) => {
    const from = w.source == null ? 'any source' : `rank ${w.source}`;
    if (w.collective) return w.source == null ? w.collective : `${w.collective} (from ${from})`;
    return `from ${from}, ${w.tag == null ? 'any tag' : `tag ${w.tag}`}`;
  }).join('; ');
}

// The traffic matrix: cell [i][j] = what rank i sent to rank j. A rank that did
// not report (unreachable) gets its row from what its peers say they received.
function trafficCounts(d, ranks) {
  const n = Math.min(MATRIX_MAX, Math.max(isNum(d.size) ? d.size : 0, ...ranks.map((r) => r.rank + 1)));
  const cells = Array.from({ length: n }, () => Array(n).fill(null));
  const reported = new Set();
  for (const r of ranks) {
    if (!Array.isArray(r.sent) || r.rank >= n) continue;
    reported.add(r.rank);
    r.sent.forEach((p, j) => { if (j < n && Array.isArray(p)) cells[r.rank][j] = { m: p[0] || 0, b: p[1] || 0 }; });
  }
  for (const r of ranks) {
    if (!Array.isArray(r.received) || r.rank >= n) continue;
    r.received.forEach((p, i) => {
      if (i < n && !reported.has(i) && Array.isArray(p)) cells[i][r.rank] = { m: p[0] || 0, b: p[1] || 0, inferred: true };
    });
  }
  return cells;
}

// Sequential palette, light to dark; the legend uses the same stops.
const PALETTE = ['#eef4fb', '#c6dbef', '#6baed6', '#2171b5', '#08306b'];
function heat(t) {
  const x = Math.max(0, Math.min(1, t)) * (PALETTE.length - 1);
  const i = Math.min(PALETTE.length - 2, Math.floor(x));
  const f = x - i;
  const [a, b] = [PALETTE[i], PALETTE[i + 1]].map((h) => [1, 3, 5].map((k) => parseInt(h.slice(k, k + 2), 16)));
  return `rgb(${a.map((v, k) => Math.round(v + (b[k] - v) * f)).join(',')})`;
}

function trafficMatrix(d, ranks) {
  const mode = ui.matrixMode.get(d.domain) || 'bytes';
  const cells = trafficCounts(d, ranks);
  const n = cells.length;
  if (!n) return null;
  const val = (c) => (c ? (mode === 'bytes' ? c.b : c.m) : 0);
  const max = Math.max(0, ...cells.flat().map(val));
  const small = n <= 8;                     // small domains: print the values in the cells
  const step = n > 32 ? 8 : n > 16 ? 4 : 1; // label every rank only where it fits

  const head = el('tr', {}, el('th', { class: 'corner', title: 'rows send, columns receive' }, 'from \\ to'),
    Array.from({ length: n }, (_, j) => el('th', { class: 'col' }, j % step === 0 ? String(j) : '')));
  const body = cells.map((row, i) => el('tr', {},
    el('th', { class: 'row' }, i % step === 0 || small ? String(i) : ''),
    row.map((c, j) => {
      const td = el('td', { class: `cell${c ? '' : ' unknown'}${c && c.inferred ? ' inferred' : ''}${i === j ? ' self' : ''}`,
        data: { from: i, to: j, messages: c && c.m, bytes: c && c.b } });
      if (c && val(c) > 0) td.style.backgroundColor = heat(Math.log1p(val(c)) / Math.log1p(max));
      if (small && c) {
        td.textContent = val(c) === 0 ? '0' : mode === 'bytes' ? bytes(c.b) : count(c.m);
        if (val(c) === 0) td.classList.add('zero');
        if (max && Math.log1p(val(c)) / Math.log1p(max) > 0.6) td.classList.add('dark');
      }
      return td;
    })));
  const table = el('table', { class: `matrix-table${small ? ' small' : n > 32 ? ' dense' : ''}` },
    el('thead', {}, head), el('tbody', {}, body));

  const legend = el('div', { class: 'legend-bar' });
  legend.style.background = `linear-gradient(to right, ${PALETTE.join(', ')})`;
  const toggle = el('div', { class: 'matrix-mode', role: 'group' }, ['messages', 'bytes'].map((m) =>
    el('button', { type: 'button', data: { mode: m }, 'aria-pressed': String(m === mode) }, m)));

  const wrap = el('div', { class: 'matrix', data: { mode } },
    el('div', { class: 'matrix-head' }, el('h3', {}, 'Traffic'), el('span', { class: 'muted' }, 'row sends to column'), toggle),
    el('div', { class: 'scroll-x' }, table),
    el('div', { class: 'legend' }, el('span', {}, '0'), legend,
      el('span', {}, mode === 'bytes' ? bytes(max) : `${count(max)} msgs`), el('span', { class: 'muted' }, '(log scale)')),
    d.size > n ? el('p', { class: 'muted' }, `Showing ranks 0 to ${n - 1} of ${d.size}.`) : null);
  return wrap;
}

function cellText(td) {
  const { from, to, messages, bytes: b } = td.dataset;
  if (messages == null) return `rank ${from} → rank ${to}: unknown (rank ${from} did not report)`;
  const inferred = td.classList.contains('inferred') ? ` (as rank ${to} received it)` : '';
  return `rank ${from} → rank ${to}: ${count(Number(messages))} messages, ${bytes(Number(b))} (${count(Number(b))} bytes)${inferred}`;
}

// The tooltip follows whichever matrix cell is under the mouse.
function hoverCell(e) {
  const td = e.target instanceof Element ? e.target.closest('td.cell') : null;
  const tip = $('#tooltip');
  ui.hover = td;
  tip.hidden = !td;
  if (td) { tip.textContent = cellText(td); moveTooltip(e); }
}

// A new document changed the numbers under the mouse: show them at once.
function refreshTooltip() {
  if (!ui.hover) return;
  if (ui.hover.isConnected) $('#tooltip').textContent = cellText(ui.hover);
  else { ui.hover = null; $('#tooltip').hidden = true; }
}

function moveTooltip(e) {
  const tip = $('#tooltip');
  if (tip.hidden) return;
  // Keep the tooltip inside the window: flip to the left near the right edge.
  const x = e.clientX + 14 + tip.offsetWidth > window.innerWidth ? e.clientX - tip.offsetWidth - 10 : e.clientX + 14;
  tip.style.left = `${Math.max(4, x)}px`;
  tip.style.top = `${e.clientY + 16}px`;
}

// ---------- workflows ----------

function renderWorkflows(runs) {
  patch($('#tab-workflows'), runs.length ? runs.map(workflowPanel) : [el('p', { class: 'empty' }, 'No workflow right now.')]);
}

function workflowPanel(run, index) {
  const doc = run.doc || {};
  const steps = doc.steps || {};
  const edges = asList(doc.edges).filter((e) => Array.isArray(e) && Object.hasOwn(steps, e[0]) && Object.hasOwn(steps, e[1]));
  return el('section', { class: 'card workflow', data: { name: run.name, state: doc.state, key: run.name } },
    el('header', { class: 'panel-head' },
      el('h2', {}, doc.workflow || run.name), badge(doc.state),
      el('span', { class: 'muted' }, [doc.mode && `${doc.mode} mode`, isNum(doc.seconds) && seconds(doc.seconds)].filter(Boolean).join(' · '))),
    doc.error ? el('p', { class: 'run-error' }, el('strong', {}, 'failed: '), doc.error) : null,
    el('div', { class: 'scroll-x graph-wrap' }, workflowGraph(steps, edges, index)),
    bytesSplit(doc),
    el('div', { class: 'scroll-x' }, stepTable(steps)));
}

// Layered layout: a step's column is its longest path from a source (a cycle,
// which a workflow should not have, stops after n rounds instead of looping).
// An edge that skips columns gets a waypoint in each column it crosses, so it
// runs in a lane of its own instead of behind the boxes it passes.
function layout(names, edges) {
  const layer = new Map(names.map((n) => [n, 0]));
  for (let round = 0; round < names.length; round++) {
    let changed = false;
    for (const [a, b] of edges) if (layer.get(b) < layer.get(a) + 1) { layer.set(b, layer.get(a) + 1); changed = true; }
    if (!changed) break;
  }
  const cols = [];
  const put = (id, l) => (cols[l] = cols[l] || []).push(id);
  for (const n of names) put(n, layer.get(n));
  const preds = new Map();
  const chains = edges.map(([a, b]) => {
    const chain = [a];
    for (let l = layer.get(a) + 1; l < layer.get(b); l++) {
      const waypoint = { waypoint: true };   // an object: no step name can collide with it
      put(waypoint, l);
      chain.push(waypoint);
    }
    chain.push(b);
    for (let i = 1; i < chain.length; i++) preds.set(chain[i], [...(preds.get(chain[i]) || []), chain[i - 1]]);
    return chain;
  });
  // Order each column by the mean row of its predecessors, to uncross edges a little.
  const row = new Map();
  const meanRow = (id) => {
    const rows = (preds.get(id) || []).filter((p) => row.has(p)).map((p) => row.get(p));
    return rows.length ? rows.reduce((s, v) => s + v, 0) / rows.length : 0;
  };
  const columns = cols.filter(Boolean);
  for (const col of columns) {
    col.sort((x, y) => meanRow(x) - meanRow(y));
    col.forEach((id, i) => row.set(id, i));
  }
  return { columns, chains };
}

function workflowGraph(steps, edges, index) {
  const names = Object.keys(steps);
  if (!names.length) return el('p', { class: 'muted' }, 'no steps');
  const { columns, chains } = layout(names, edges);
  const W = 168, H = 52, LANE = 12, GX = 64, GY = 18, PAD = 12;
  const tall = (id) => (typeof id === 'string' ? H : LANE);
  const colHeight = (col) => col.reduce((s, id) => s + tall(id), 0) + (col.length - 1) * GY;
  const height = PAD * 2 + Math.max(...columns.map(colHeight));
  const width = PAD * 2 + columns.length * W + (columns.length - 1) * GX;
  const pos = new Map();      // id -> top-left corner; columns centred vertically
  columns.forEach((col, x) => {
    let y = (height - colHeight(col)) / 2;
    for (const id of col) { pos.set(id, { x: PAD + x * (W + GX), y }); y += tall(id) + GY; }
  });

  const markerId = `arrow-${index}`;
  const root = svg('svg', { class: 'graph', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
    'aria-label': 'workflow graph' },
  svg('defs', {}, svg('marker', { id: markerId, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
  for (const chain of chains) {
    const a = chain[0], b = chain[chain.length - 1];
    root.append(svg('path', { class: `edge${steps[a].state === 'done' ? ' flowing' : ''}`, d: edgePath(chain, pos, tall, W),
      'marker-end': `url(#${markerId})`, data: { from: a, to: b } }));
  }
  for (const name of names) {
    const s = steps[name] || {};
    const { x, y } = pos.get(name);
    const label = isNum(s.width) && s.width > 1 ? `${name} ×${s.width}` : name;
    root.append(svg('g', { class: `step node state-${s.state || 'unknown'}`, data: { step: name, state: s.state, key: name }, transform: `translate(${x},${y})` },
      svg('title', {}, `${name}: ${s.state || 'unknown'}${s.kind ? ` (${s.kind})` : ''}${s.endpoint ? ` at ${s.endpoint}` : ''}`),
      svg('rect', { width: W, height: H, rx: 8, ry: 8 }),
      svg('text', { x: 12, y: 21, class: 'node-name' }, clip(label, 20)),
      svg('text', { x: 12, y: 39, class: 'node-state' }, [s.state || 'unknown', s.kind].filter(Boolean).join(' · '))));
  }
  return root;
}

// A path through an edge's chain: straight along each waypoint's lane, an S-curve
// across each gap between columns.
function edgePath(chain, pos, tall, W) {
  const mid = (id) => pos.get(id).y + tall(id) / 2;
  const first = chain[0];
  let x0 = pos.get(first).x + W, y0 = mid(first);
  let d = `M${x0},${y0}`;
  chain.slice(1).forEach((id, i, rest) => {
    const x1 = pos.get(id).x - (i === rest.length - 1 ? 2 : 0), y1 = mid(id);
    const c = (x0 + x1) / 2;
    d += ` C${c},${y0} ${c},${y1} ${x1},${y1}`;
    if (typeof id !== 'string') d += ` L${x1 + W},${y1}`;
    x0 = x1 + W;
    y0 = y1;
  });
  return d;
}

const clip = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

function stepTable(steps) {
  const rows = Object.entries(steps).map(([name, s]) => {
    const took = isNum(s.started) && isNum(s.ended) ? s.ended - s.started : null;
    return el('tr', { class: 'step', data: { step: name, state: s.state, key: name } },
      el('td', {}, name),
      el('td', {}, s.kind ?? '—'),
      el('td', { class: 'mono url' }, s.endpoint ?? '—'),
      el('td', {}, badge(s.state)),
      el('td', { class: 'num' }, s.width ?? '—'),
      el('td', { class: 'num' }, isNum(s.started) ? seconds(s.started) : '—'),
      el('td', { class: 'num' }, took != null ? seconds(took) : s.state === 'running' ? 'running' : '—'),
      el('td', { class: 'num' }, bytes(s.bytes_in)),
      el('td', { class: 'num' }, bytes(s.bytes_out)));
  });
  const table = el('table', { class: 'data steps' },
    el('thead', {}, el('tr', {}, ['Step', 'Kind', 'Endpoint', 'State', 'Width', 'Started', 'Took', 'Bytes in', 'Bytes out']
      .map((h, i) => el('th', { class: i >= 4 ? 'num' : '' }, h)))),
    el('tbody'));
  fillBody($('tbody', table), rows, 9);
  return table;
}

// Bytes that went step to step directly against bytes relayed by the manager.
function bytesSplit(doc) {
  if (!isNum(doc.direct_bytes) && !isNum(doc.manager_bytes)) return null;
  const direct = doc.direct_bytes || 0, manager = doc.manager_bytes || 0;
  const total = direct + manager;
  const d = el('div', { class: 'split-direct' }), m = el('div', { class: 'split-manager' });
  d.style.width = `${total ? (100 * direct) / total : 0}%`;
  m.style.width = `${total ? (100 * manager) / total : 0}%`;
  return el('div', { class: 'bytes-split' },
    el('dl', { class: 'figures' },
      el('div', { class: 'figure direct' }, el('dt', {}, 'bytes moved direct'), el('dd', { data: { field: 'direct_bytes' } }, bytes(doc.direct_bytes))),
      el('div', { class: 'figure manager' }, el('dt', {}, 'through the manager'), el('dd', { data: { field: 'manager_bytes' } }, bytes(doc.manager_bytes)))),
    el('div', { class: 'split-bar', title: `${count(direct)} bytes direct, ${count(manager)} bytes through the manager` }, d, m));
}

// ---------- farms ----------

function renderFarms(runs) {
  patch($('#tab-farms'), runs.length ? runs.map(farmPanel) : [el('p', { class: 'empty' }, 'No farm right now.')]);
}

function farmPanel(run) {
  const doc = run.doc || {};
  const batch = doc.batch || {};
  const fig = (label, field, value, cls) => el('div', { class: `figure ${cls || ''}` },
    el('dt', {}, label), el('dd', { data: { field } }, value));
  const group = (title, ...items) => el('div', { class: 'group' }, el('h3', {}, title), el('dl', { class: 'figures' }, items));
  const done = pct(doc.tasks_done, doc.tasks_submitted);
  const fill = el('div', { class: 'bar-fill' });
  fill.style.width = `${Math.min(100, done ?? 0)}%`;
  return el('section', { class: 'card farm', data: { name: run.name, state: doc.state, key: run.name } },
    el('header', { class: 'panel-head' }, el('h2', {}, run.name), badge(doc.state)),
    el('div', { class: 'farm-grid' },
      group('Workers',
        fig('workers', 'workers', num(doc.workers)),
        fig('lost', 'workers_lost', num(doc.workers_lost), doc.workers_lost ? 'bad' : '')),
      group('Tasks',
        fig('done', 'tasks_done', num(doc.tasks_done)),
        fig('submitted', 'tasks_submitted', num(doc.tasks_submitted)),
        fig('failed', 'tasks_failed', num(doc.tasks_failed), doc.tasks_failed ? 'bad' : ''),
        fig('resubmitted', 'tasks_resubmitted', num(doc.tasks_resubmitted), doc.tasks_resubmitted ? 'warn' : '')),
      group('Batch size',
        fig('last', 'batch_last', num(batch.last)),
        fig('mean', 'batch_mean', isNum(batch.mean) ? batch.mean.toFixed(1) : '—'),
        fig('max', 'batch_max', num(batch.max))),
      group('Throughput',
        fig('tasks / s', 'tasks_per_second', isNum(doc.tasks_per_second) ? doc.tasks_per_second.toFixed(1) : '—'),
        sparkline(ui.farmHistory.get(run.name) || []))),
    el('div', { class: 'progress' },
      el('div', { class: 'muted' }, `${count(doc.tasks_done)} of ${count(doc.tasks_submitted)} tasks done${done == null ? '' : ` (${done.toFixed(0)}%)`}`),
      el('div', { class: 'bar' }, fill)));
}

// Plain numbers for the test hooks: no thousands separators.
const num = (n) => (isNum(n) ? String(n) : '—');

// Keep a tasks-per-second point per new farm update (a repeat of the same
// `updated` is the same update seen again, e.g. after a reconnect).
function recordFarm(run, doc) {
  const h = ui.farmHistory.get(run.name) || [];
  const last = h[h.length - 1];
  if (isNum(doc.tasks_per_second) && (!last || last.updated !== run.updated)) {
    h.push({ updated: run.updated, tps: doc.tasks_per_second });
    if (h.length > SPARK_POINTS) h.shift();
  }
  ui.farmHistory.set(run.name, h);
}

// A small line of tasks per second over the updates seen, scaled to its maximum.
function sparkline(history) {
  const W = 220, H = 44, P = 3;
  if (history.length < 2) return el('div', { class: 'spark muted' }, 'collecting…');
  const max = Math.max(...history.map((p) => p.tps), 1e-9);
  const xs = (i) => P + (i * (W - 2 * P)) / (history.length - 1);
  const ys = (v) => H - P - (v / max) * (H - 2 * P);
  const pts = history.map((p, i) => `${xs(i).toFixed(1)},${ys(p.tps).toFixed(1)}`);
  const last = history.length - 1;
  return el('div', { class: 'spark', title: `tasks per second over the last ${history.length} updates; max ${max.toFixed(1)}` },
    svg('svg', { class: 'sparkline', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'tasks per second over updates' },
      svg('path', { class: 'spark-area', d: `M${xs(0)},${H - P} L${pts.join(' L')} L${xs(last)},${H - P} Z` }),
      svg('polyline', { class: 'spark-line', points: pts.join(' ') }),
      svg('circle', { class: 'spark-dot', cx: xs(last), cy: ys(history[last].tps), r: 2.5 })),
    el('div', { class: 'spark-scale muted' }, `max ${max.toFixed(1)} · ${history.length} updates`));
}

// ---------- start ----------

function init() {
  $('#key-connect').addEventListener('click', submitKey);
  $('#key-input').addEventListener('keydown', (e) => { if (e.key === 'Enter') submitKey(e); });
  $('#forget-key').addEventListener('click', forgetKey);
  // Delegated: drawn elements are kept across documents, with whatever listeners they had.
  document.addEventListener('click', (e) => {
    const t = e.target instanceof Element ? e.target : null;
    const tab = t && t.closest('#tabs .tab');
    if (tab) return selectTab(tab.dataset.tab);
    const mode = t && t.closest('.matrix-mode button');
    if (mode) { ui.matrixMode.set(mode.closest('.domain').dataset.domain, mode.dataset.mode); draw(); }
  });
  // Remember which stdout tails are open ('toggle' does not bubble: capture it).
  document.addEventListener('toggle', (e) => {
    const row = e.target instanceof Element && e.target.closest('tr.job');
    if (row) { if (e.target.open) ui.openJobs.add(row.dataset.job); else ui.openJobs.delete(row.dataset.job); }
  }, true);
  document.addEventListener('mouseover', hoverCell);
  document.addEventListener('mousemove', moveTooltip);
  // Back in view after a sleep: retry now instead of waiting out the back-off.
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && conn.timer && sessionStorage.getItem(KEY_NAME)) { conn.backoff = 0; connect(false); }
  });
  if (sessionStorage.getItem(KEY_NAME)) connect(true); else showPrompt('');
}

init();
