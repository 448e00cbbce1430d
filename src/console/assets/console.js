// The singlet console: one page, no framework. It asks the runner's /_console/api/ for the
// patterns and the table, runs what the person asks for, and draws the answer.
'use strict';

const DOMAIN_NOTES = {
  fleet: 'A plate and a chassis number must each be unique. DynamoDB is unique only on the key, so each becomes a lock item of its own, written in the same transaction as the vehicle.',
  accounts: 'Accounts are unique on email and username: two lock items beside each account, claimed and released in the same transaction as the account.',
  library: 'Branches hold their patrons and copies in one partition; loans live under their patron. Open loans sit in a sharded index, mark-overdue moves the ones that fell due into the sparse overdue indexes, and a return takes a loan out of them.',
  audit: 'A resource is one partition: its current state and an append-only event per change. A change is guarded by the version it read, so of two reviewers changing one version exactly one wins.',
};

const ui = {
  domain: location.hash.slice(1) || 'fleet',
  data: null,        // the last /state answer, kept current by every action
  open: null,        // the pattern whose form is open
  allDomains: false,
  edits: {},         // per pattern, the form's fields as the person edited them: kept after Run
  byIndex: '',       // the table view: '' for the table, else an index's name
  search: '',        // the table view's search text
};

// ---- Small helpers ----------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.className = value;
    else if (name in el && name !== 'list') el[name] = value;
    else el.setAttribute(name, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const $ = (id) => document.getElementById(id);
const json = (v) => JSON.stringify(v, null, 2);
const short = (v, n = 48) => (v.length > n ? v.slice(0, n - 1) + '…' : v);
const statusClass = (s) => 's' + String(s || 0)[0];
const plural = (n, one, many) => `${n} ${n === 1 ? one : (many || one + 's')}`;
// An index's colour, by its place in the table's definition.
const ixClass = (name) => 'ix ix-' + Math.max(0, (ui.data.indexes || []).indexOf(name));

// A number that reads as an epoch time (milliseconds, or seconds for expiries) as ISO-8601 UTC.
function readableTime(value) {
  if (typeof value !== 'number' || !Number.isInteger(value)) return null;
  if (value >= 1e12 && value < 1e13) return new Date(value).toISOString();
  if (value >= 1e9 && value < 1e10) return new Date(value * 1000).toISOString().replace('.000Z', 'Z');
  return null;
}

// Every epoch time in a JSON value, as [path, value, readable].
function timesIn(value, path = '') {
  if (Array.isArray(value)) return value.flatMap((v, i) => timesIn(v, `${path}[${i}]`));
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => timesIn(v, path ? `${path}.${k}` : k));
  const readable = readableTime(value);
  return readable ? [[path, value, readable]] : [];
}

function toast(text) {
  const t = $('toast');
  t.textContent = text;
  t.classList.add('show');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove('show'), 2600);
}

// The runner's per-start secret, from the URL it printed (?token=...): kept for this tab and
// taken out of the address bar, so it is not in the history or a shared screenshot.
const secret = (() => {
  const url = new URL(location.href);
  const token = url.searchParams.get('token');
  if (token) {
    sessionStorage.setItem('singlet-console', token);
    url.searchParams.delete('token');
    history.replaceState(null, '', url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem('singlet-console') || '';
})();

async function api(path, body) {
  const init = body === undefined ? { headers: { 'x-singlet-console': secret } } : {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-singlet-console': secret },
    body: JSON.stringify(body),
  };
  const response = await fetch('/_console/api/' + path, init);
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

// Runs an action with the page marked busy (the browser test waits on data-busy).
async function busy(work) {
  document.body.dataset.busy = '1';
  document.querySelectorAll('button').forEach((b) => (b.disabled = true));
  try {
    await work();
  } catch (error) {
    toast(error.message);
    $('result').replaceChildren(h('div', { class: 'box' }, h('header', {}, 'Failed'), h('div', { class: 'inner' }, error.message)));
  } finally {
    document.querySelectorAll('button').forEach((b) => (b.disabled = false));
    document.body.dataset.busy = '0';
  }
}

// Takes in what an action answered: the table and fresh examples.
function absorb(answer) {
  if (answer.partitions) ui.data.partitions = answer.partitions;
  if (answer.changes) ui.data.changes = answer.changes;
  if (answer.patterns) ui.data.patterns = answer.patterns;
}

// ---- Tabs -------------------------------------------------------------------------------

function domainOf(partition) {
  return partition.domain || 'other';
}

function renderTabs() {
  const counts = {};
  for (const p of ui.data.partitions) {
    for (const item of p.items) if (item.change !== 'removed') counts[domainOf(p)] = (counts[domainOf(p)] || 0) + 1;
  }
  $('tabs').replaceChildren(...ui.data.domains.map((d) =>
    h('button', {
      class: d.id === ui.domain ? 'on' : '',
      'data-domain': d.id,
      onclick: () => { ui.domain = d.id; location.hash = d.id; ui.open = null; clearResult(); render(); },
    }, d.title, h('span', { class: 'count' }, counts[d.id] || 0))));
}

// ---- Patterns ---------------------------------------------------------------------------

function patternPath(pattern, form) {
  let path = pattern.path;
  for (const [name] of pattern.params) {
    path = path.replace('{' + name + '}', encodeURIComponent(form.elements['p-' + name].value.trim()));
  }
  const query = form.elements.query.value.trim().replace(/^\?/, '');
  return query ? path + '?' + query : path;
}

function parseHeaders(text) {
  return text.split('\n').map((line) => line.trim()).filter(Boolean).map((line) => {
    const at = line.indexOf(':');
    return at < 0 ? [line, ''] : [line.slice(0, at).trim(), line.slice(at + 1).trim()];
  });
}

function patternCard(pattern) {
  // What the person typed stays until they ask for the example again: Run does not replace it.
  const edited = ui.edits[pattern.function] || {};
  const field = (name, example) => (name in edited ? edited[name] : example);
  const keep = (e) => {
    if (!e.target.name) return;
    ui.edits[pattern.function] = { ...(ui.edits[pattern.function] || {}), [e.target.name]: e.target.value };
  };
  const body = pattern.body || '';
  const form = h('form', { class: 'try', oninput: keep, onsubmit: (e) => { e.preventDefault(); runPattern(pattern, form); } },
    pattern.params.map(([name, value]) =>
      h('label', {}, name, h('input', { name: 'p-' + name, value: field('p-' + name, value), spellcheck: false }))),
    h('label', {}, 'query', h('input', { name: 'query', value: field('query', pattern.query), spellcheck: false })),
    h('label', {}, 'headers', h('textarea', {
      name: 'headers', rows: Math.max(1, pattern.headers.length), spellcheck: false,
      value: field('headers', pattern.headers.map(([n, v]) => n + ': ' + v).join('\n')),
    })),
    pattern.method === 'GET' || pattern.method === 'DELETE' ? null :
      h('label', {}, 'body', h('textarea', {
        name: 'body', spellcheck: false, wrap: 'off',
        rows: Math.min(12, Math.max(3, field('body', body).split('\n').length)), value: field('body', body),
      })),
    pattern.live ? null : h('div', { class: 'hint' }, 'Nothing in the table to point at yet: this is the example of events/. Seed data for a working one.'),
    ui.edits[pattern.function] ? h('div', { class: 'hint edited' }, 'Your edits are kept after Run. ',
      h('a', { href: '#', 'data-example': pattern.function, onclick: (e) => { e.preventDefault(); delete ui.edits[pattern.function]; renderPatterns(); } }, 'Back to the example')) : null,
    h('div', { class: 'buttons' },
      h('button', { type: 'submit', 'data-run': pattern.function }, 'Run'),
      pattern.race ? h('button', {
        type: 'button', class: 'race', 'data-race': pattern.race,
        onclick: () => runRace(pattern.race),
      }, '⚡ ' + raceTitle(pattern.race)) : null));
  const card = h('details', {
    class: 'pattern', open: ui.open === pattern.function, 'data-function': pattern.function,
    ontoggle: () => { if (card.open) ui.open = pattern.function; },
  },
  h('summary', {},
    h('div', { class: 'route' }, h('span', { class: 'method m-' + pattern.method }, pattern.method), h('code', {}, pattern.path)),
    h('div', { class: 'purpose' }, pattern.summary || pattern.function, ' ', h('span', { class: 'fn' }, pattern.function)),
    h('div', { class: 'scopes', title: 'a token needs one of these scopes' }, (pattern.scopes || []).map((scope) => h('span', { class: 'scope' }, scope)))),
  form);
  return card;
}

function raceTitle(id) {
  const race = ui.data.races.find((r) => r.id === id);
  return race ? race.title : id;
}

function localInput(date) {
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function markOverdueCard() {
  const input = h('input', { type: 'datetime-local', name: 'time', value: localInput(new Date()) });
  const shift = (days) => () => {
    input.value = localInput(new Date(Date.now() + days * 86400000));
  };
  const form = h('form', { class: 'try', onsubmit: (e) => { e.preventDefault(); runMarkOverdue(new Date(input.value)); } },
    h('label', {}, 'now is', input),
    h('div', { class: 'buttons' },
      h('button', { type: 'button', class: 'ghost-light race', onclick: shift(0) }, 'now'),
      h('button', { type: 'button', class: 'race', onclick: shift(3) }, '+3 days'),
      h('button', { type: 'button', class: 'race', onclick: shift(7) }, '+7 days'),
      h('button', { type: 'submit', 'data-run': 'mark-overdue' }, 'Run mark-overdue')));
  return h('details', {
    class: 'pattern scheduled', open: ui.open === 'mark-overdue', 'data-function': 'mark-overdue',
    ontoggle: (e) => { if (e.target.open) ui.open = 'mark-overdue'; },
  },
  h('summary', {},
    h('div', { class: 'route' }, h('span', { class: 'method m-PATCH' }, 'CRON'), h('code', {}, 'mark-overdue')),
    h('div', { class: 'purpose' }, 'The scheduled job (EventBridge, every 15 minutes): move every open loan due before "now" from the open-loans index to the overdue indexes')),
  form);
}

// The free query and scan: the table or an index, a key condition, a filter, a limit, a direction.
function exploreCard() {
  const e = ui.exploreForm || { mode: 'query', index: '', partition: '', sortOp: '', sort: '', limit: '25', descending: false, filterAttribute: '', filterOp: '=', filterValue: '' };
  const select = (name, options, value) => h('select', { name }, options.map(([v, label]) => h('option', { value: v, selected: v === value }, label)));
  const form = h('form', { class: 'try explore', onsubmit: (ev) => { ev.preventDefault(); runExplore(form); } },
    h('label', {}, 'operation', select('mode', [['query', 'Query'], ['scan', 'Scan']], e.mode)),
    h('label', {}, 'on', select('index', [['', 'the table'], ...(ui.data.indexes || []).map((i) => [i, 'index ' + i])], e.index)),
    h('label', {}, 'partition', h('input', { name: 'partition', value: e.partition, spellcheck: false, placeholder: 'partition key value (Query)' })),
    h('label', {}, 'sort key', h('div', { class: 'row' },
      select('sortOp', [['', 'any'], ['=', '='], ['begins_with', 'begins with'], ['<', '<']], e.sortOp),
      h('input', { name: 'sort', value: e.sort, spellcheck: false }))),
    h('label', {}, 'filter', h('div', { class: 'row' },
      h('input', { name: 'filterAttribute', value: e.filterAttribute, placeholder: 'attribute', spellcheck: false }),
      select('filterOp', [['=', '='], ['contains', 'contains']], e.filterOp),
      h('input', { name: 'filterValue', value: e.filterValue, placeholder: 'value', spellcheck: false }))),
    h('label', {}, 'limit', h('input', { name: 'limit', value: e.limit, type: 'number', min: 1, max: 500 })),
    h('label', {}, 'descending', h('input', { name: 'descending', type: 'checkbox', checked: e.descending })),
    h('div', { class: 'hint' }, 'The filter is applied to the page read, as a FilterExpression is: it saves no capacity.'),
    h('div', { class: 'buttons' }, h('button', { type: 'submit', 'data-run': 'explore' }, 'Run')));
  return h('details', {
    class: 'pattern explore-card', open: ui.open === 'explore', 'data-function': 'explore',
    ontoggle: (ev) => { if (ev.target.open) ui.open = 'explore'; },
  },
  h('summary', {},
    h('div', { class: 'route' }, h('span', { class: 'method m-GET' }, 'FREE'), h('code', {}, 'Query or scan')),
    h('div', { class: 'purpose' }, 'Any partition of the table or of an index, with its consumed capacity')),
  form);
}

function renderPatterns() {
  $('domain-note').textContent = DOMAIN_NOTES[ui.domain] || '';
  const list = [exploreCard(), ...ui.data.patterns.filter((p) => p.domain === ui.domain).map(patternCard)];
  if (ui.domain === 'library') list.push(markOverdueCard());
  $('pattern-list').replaceChildren(...list);
}

// ---- Actions ----------------------------------------------------------------------------

function person() {
  return $('person').value.trim() || 'ada';
}

function runPattern(pattern, form) {
  const body = form.elements.body ? form.elements.body.value.trim() : '';
  const request = {
    method: pattern.method,
    path: patternPath(pattern, form),
    headers: parseHeaders(form.elements.headers.value),
    body: body || null,
  };
  ui.open = pattern.function;
  return busy(async () => {
    const answer = await api('run', { person: person(), request });
    absorb(answer);
    showRun(answer, pattern);
    render();
  });
}

function runExplore(form) {
  const f = form.elements;
  const asked = {
    mode: f.mode.value, index: f.index.value || null, partition: f.partition.value.trim(),
    sortOp: f.sortOp.value, sort: f.sort.value.trim(), limit: Number(f.limit.value) || null,
    descending: f.descending.checked, filterAttribute: f.filterAttribute.value.trim(),
    filterOp: f.filterOp.value, filterValue: f.filterValue.value,
  };
  ui.exploreForm = { ...asked, index: asked.index || '', limit: String(asked.limit || '') };
  ui.open = 'explore';
  return busy(async () => {
    const answer = await api('explore', asked);
    showExplore(asked, answer);
  });
}

function runRace(race) {
  return busy(async () => {
    const answer = await api('race', { person: person(), race });
    ui.data.partitions = answer.race.table;
    ui.data.changes = answer.race.changes;
    ui.data.patterns = answer.patterns;
    showRace(answer.race);
    $('result').append(heatBox(answer.heat, false));
    render();
  });
}

function runMarkOverdue(when) {
  if (Number.isNaN(when.getTime())) return toast('Choose a time');
  return busy(async () => {
    const answer = await api('mark-overdue', { time: when.toISOString().replace(/\.\d+Z$/, 'Z') });
    absorb(answer);
    showMarkOverdue(answer);
    render();
  });
}

// ---- Heat: each partition key value's units a second against DynamoDB's per-key limits -----

// A bar of `value` against `limit`, the limit drawn as a line two thirds along.
function heatBar(value, limit) {
  const share = Math.min(value / limit, 1.5);
  return h('span', { class: 'heat-bar' + (value > limit ? ' over' : value > limit * 0.5 ? ' warm' : ''), title: `${value} of ${limit} a second` },
    h('span', { class: 'fill', style: `width:${(share / 1.5) * 100}%` }),
    h('span', { class: 'limit' }));
}

// The heat report as a box: every family's hottest keys (or, `onlyNow`, the keys used this second).
function heatBox(report, onlyNow) {
  if (!report || !report.limited) {
    return h('div', { class: 'box heat' }, h('header', {}, 'Heat'),
      h('div', { class: 'inner' }, 'The engine is not limited (--partition-limits off, or an external --endpoint): no heat is kept.'));
  }
  const families = report.families
    .map((f) => ({ ...f, keys: onlyNow ? f.keys.filter((k) => k.wcuThisSecond || k.rcuThisSecond) : f.keys }))
    .filter((f) => f.keys.length);
  const row = (k) => h('tr', { 'data-pk': k.pk },
    h('td', {}, h('code', {}, short(k.pk, 40))),
    h('td', { class: 'num' }, onlyNow ? k.wcuThisSecond : k.peakWcuPerSecond),
    h('td', {}, heatBar(onlyNow ? k.wcuThisSecond : k.peakWcuPerSecond, report.writeUnitsPerKey)),
    h('td', { class: 'num' }, onlyNow ? k.rcuThisSecond : k.peakRcuPerSecond),
    h('td', {}, heatBar(onlyNow ? k.rcuThisSecond : k.peakRcuPerSecond, report.readUnitsPerKey)),
    h('td', { class: 'num' }, k.throttledRequests || ''));
  return h('div', { class: 'box heat', 'data-throttled': report.throttledRequests },
    h('header', {}, onlyNow ? 'The keys it used, this second' : `Hottest keys, last ${report.windowSeconds / 60} minutes`,
      h('span', { class: 'sub' }, ` limits per key: ${report.writeUnitsPerKey} WCU and ${report.readUnitsPerKey} RCU a second · ${plural(report.throttledRequests, 'request')} throttled`)),
    h('div', { class: 'inner' }, families.length ? families.map((f) => h('div', { class: 'heat-family', 'data-family': f.family, 'data-index': f.index || '' },
      h('h4', {}, h('code', {}, f.family), ' ', f.index ? h('span', { class: ixClass(f.index) }, f.index) : 'table'),
      h('table', { class: 'heat-keys' },
        h('tr', {}, h('th', {}, 'partition key'), h('th', {}, onlyNow ? 'WCU' : 'peak WCU/s'), h('th', {}, ''), h('th', {}, onlyNow ? 'RCU' : 'peak RCU/s'), h('th', {}, ''), h('th', {}, 'throttled')),
        f.keys.map(row))))
      : h('p', { class: 'empty' }, 'No key has been read or written in the last minutes.')));
}

let heatTimer = null;
// The heat view, live: read again every second while it is on show.
function showHeat() {
  const draw = async () => {
    if ($('result-title').textContent !== 'heat') { clearInterval(heatTimer); heatTimer = null; return; }
    try { $('result').replaceChildren(heatBox(await api('heat'))); } catch (error) { toast(error.message); }
  };
  setResult('heat', h('div', { class: 'box' }, h('header', {}, 'Reading the heat…')));
  clearInterval(heatTimer);
  heatTimer = setInterval(draw, 1000);
  draw();
}

// ---- The result panel -------------------------------------------------------------------

function headerLines(headers, keep) {
  return headers.filter(([n]) => !keep || keep.includes(n.toLowerCase())).map(([n, v]) =>
    h('div', {}, h('b', {}, n), ': ', n.toLowerCase() === 'authorization' ? short(v, 40) : v));
}

function requestBox(sent) {
  return h('div', { class: 'box request' },
    h('header', {}, 'HTTP request', h('span', { class: 'sub' }, 'through the front door, as API Gateway would pass it on')),
    h('div', { class: 'inner' },
      h('pre', {}, h('b', {}, sent.method + ' ' + sent.path)),
      h('div', { class: 'headers mono' }, headerLines(sent.headers)),
      sent.body ? h('pre', {}, prettyText(sent.body)) : null));
}

function prettyText(text) {
  try { return json(JSON.parse(text)); } catch { return text; }
}

function answerBox(answer) {
  return h('div', { class: 'box answer', 'data-status': answer.status },
    h('header', {}, 'Answer', h('span', { class: 'status ' + statusClass(answer.status) }, answer.status),
      h('span', { class: 'total' }, answer.elapsedMs.toFixed(1) + ' ms')),
    h('div', { class: 'inner' },
      h('div', { class: 'headers mono' }, headerLines(answer.headers, ['content-type', 'location', 'etag', 'retry-after', 'x-consumed-capacity'])),
      answer.body === null ? h('span', { class: 'sub' }, '(no body)') : h('pre', {}, json(answer.body)),
      timesBox(answer.body)));
}

function timesBox(value) {
  const times = timesIn(value);
  return times.length ? h('div', { class: 'times sub' }, times.map(([path, raw, readable]) =>
    h('div', {}, h('code', {}, path), ` ${raw} = `, h('b', {}, readable)))) : null;
}

function capacityTags(capacity) {
  return capacity.map((c) => {
    const parts = [];
    const total = c.units ?? ((c.readUnits || 0) + (c.writeUnits || 0));
    parts.push(h('span', { class: 'tag', title: 'consumed capacity units, ' + c.table }, `${fmt(total)} CU`));
    if (c.tableUnits !== null && c.tableUnits !== undefined) parts.push(h('span', { class: 'tag' }, `table ${fmt(c.tableUnits)}`));
    for (const [index, units] of c.indexes) parts.push(h('span', { class: 'tag' }, `${index} ${fmt(units)}`));
    return parts;
  });
}

const fmt = (n) => (Math.round(n * 100) / 100).toString();

function keyText(key) {
  if (!key || typeof key !== 'object') return '';
  return [key.pk, key.sk].filter((part) => part !== undefined).join('  ·  ');
}

function expressionRows(expressions) {
  return expressions.map((e) => [h('span', {}, e.kind), h('code', { title: e.raw }, e.resolved)]);
}

function operationCard(op, i) {
  const kv = [];
  if (op.key) kv.push([h('span', {}, 'key'), h('code', {}, keyText(op.key))]);
  kv.push(...expressionRows(op.expressions));
  if (op.found !== null && op.found !== undefined) kv.push([h('span', {}, 'item'), h('span', {}, op.found ? 'found' : 'not found')]);
  if (op.count !== null && op.count !== undefined) {
    kv.push([h('span', {}, 'read'), h('span', {}, `${op.count} item${op.count === 1 ? '' : 's'} returned` +
      (op.scanned !== null && op.scanned !== op.count ? `, ${op.scanned} read` : '') +
      (op.limit ? `, limit ${op.limit}` : '') + (op.more ? ', another page follows' : ''))]);
  }
  const parts = op.parts.length ? h('table', { class: 'parts' },
    h('tr', {}, h('th', {}, '#'), h('th', {}, 'part'), h('th', {}, 'key and expressions'), h('th', {}, 'outcome')),
    op.parts.map((p, n) => h('tr', { class: p.reason ? 'failed' : '' },
      h('td', {}, n + 1),
      h('td', {}, h('b', {}, p.action)),
      h('td', {},
        h('code', {}, keyText(p.key)),
        p.indexKeys.map((ix) => h('div', {}, h('span', { class: ixClass(ix.index) }, `${ix.index} ${ix.pk} · ${ix.sk}`))),
        p.expressions.map((e) => h('div', {}, h('span', { class: 'sub' }, e.kind + ' '), h('code', { title: e.raw }, e.resolved)))),
      h('td', {}, p.reason
        ? [h('span', { class: 'reason', title: p.reasonMessage || '' }, p.reason), p.became ? h('span', { class: 'became' }, '→ ' + p.became) : null]
        : h('span', { class: 'sub' }, op.error ? 'None' : 'ok'))))) : null;
  return h('div', { class: 'op', 'data-operation': op.operation },
    h('div', { class: 'op-head' },
      h('span', { class: 'sub' }, i + 1 + '.'),
      h('span', { class: 'opname' }, op.operation),
      op.index ? h('span', { class: 'tag index' }, op.index) : null,
      op.consistent ? h('span', { class: 'tag' }, 'consistent') : null,
      op.error ? h('span', { class: 'tag err', title: op.errorMessage || '' }, op.error) : h('span', { class: 'tag good' }, op.status === null ? 'no answer' : 'ok'),
      op.attempts > 1 ? h('span', { class: 'tag err' }, op.attempts + ' attempts') : null,
      h('span', { class: 'cap' }, capacityTags(op.capacity))),
    kv.length ? h('div', { class: 'kv' }, kv) : null,
    parts,
    op.raw ? h('details', { class: 'raw' }, h('summary', {}, 'wire JSON'), h('pre', {}, json(op.raw))) : null);
}

function totalCapacity(operations) {
  let total = 0;
  for (const op of operations) for (const c of op.capacity) total += c.units ?? ((c.readUnits || 0) + (c.writeUnits || 0));
  return total;
}

function operationsBox(operations, title) {
  return h('div', { class: 'box operations' },
    h('header', {}, title || 'DynamoDB calls', h('span', { class: 'sub' }, operations.length),
      h('span', { class: 'total' }, operations.some((o) => o.capacity.length)
        ? fmt(totalCapacity(operations)) + ' capacity units in all'
        : 'no capacity in the answers')),
    operations.length ? operations.map(operationCard) : h('div', { class: 'inner sub' }, 'None: the front door answered on its own.'),
    operations.some((o) => o.error === 'TransactionCanceledException') ? h('div', { class: 'inner billing' },
      h('b', {}, 'What a cancelled transaction costs. '),
      'Its answer carries no ConsumedCapacity, locally as on AWS, so the console cannot show a figure. ',
      'What AWS documents (DynamoDB Developer Guide, \u201cCapacity management for transactions\u201d): every item in a transaction costs two underlying writes, ',
      'one to prepare and one to commit, and that capacity is consumed even when the transaction is cancelled, a ConditionalCheckFailed included. ',
      'So budget a cancelled TransactWriteItems as if it had committed: 2 WCU per started KB of each of its items.') : null);
}

function clearResult() {
  setResult('What happened', h('p', { class: 'empty' }, 'Open a pattern and press Run.'));
}

function showExplore(asked, answer) {
  const where = asked.index ? 'index ' + asked.index : 'the table';
  setResult(asked.mode,
    h('div', { class: 'box explore-result', 'data-count': answer.count, 'data-scanned': answer.scanned },
      h('header', {}, `${asked.mode === 'query' ? 'Query' : 'Scan'} of ${where}`,
        h('span', { class: 'sub' }, `${plural(answer.count, 'item')} returned, ${answer.scanned} read` + (answer.more ? ', another page follows' : ''))),
      h('div', { class: 'inner items' }, answer.items.length ? answer.items.map(itemRow) : h('p', { class: 'sub' }, 'No item.'))),
    operationsBox(answer.operations));
}

// The domain events an action emitted: its outbox items, which the stream publishes. Whether
// each has reached the local bus's events file is checked a moment later (the runner reads the
// stream every 250 ms), and again on demand.
function eventsBox(events) {
  if (!events) return null;
  const marks = new Map();
  const check = async () => {
    const answer = await api('published');
    const arrived = new Set(answer.events.map((e) => e.detail && e.detail.eventId));
    for (const [id, mark] of marks) {
      const published = arrived.has(id);
      mark.dataset.published = published ? '1' : '0';
      mark.textContent = published ? '✓ published to the bus' : (answer.file ? 'not in the events file yet' : 'no events file');
      mark.className = 'tag ' + (published ? 'good' : '');
    }
  };
  const box = h('div', { class: 'box events', 'data-events': events.length },
    h('header', {}, 'Domain events', h('span', { class: 'sub' }, events.length
      ? `${plural(events.length, 'outbox item')} written in the same transaction; the stream publishes each to the event bus (locally, the events file)`
      : 'none: nothing changed'),
    events.length ? h('button', { type: 'button', class: 'view check-published', onclick: () => check().catch((e) => toast(e.message)) }, 'check the bus') : null),
    events.map((e) => {
      const mark = h('span', { class: 'tag', 'data-published': '' }, '…');
      if (e.detail && e.detail.eventId) marks.set(e.detail.eventId, mark);
      return h('details', { class: 'event', 'data-detail-type': e.detailType, 'data-event-id': e.detail && e.detail.eventId },
        h('summary', {}, h('b', {}, e.detailType), ' ', h('span', { class: 'sub' }, e.source),
          e.detail && e.detail.subject ? h('span', { class: 'sub' }, ` · ${e.detail.subject.type} ${e.detail.subject.id}`) : null, ' ', mark),
        h('pre', {}, json(e.detail)));
    }));
  if (events.length) setTimeout(() => check().catch(() => {}), 1200);
  return box;
}

function setResult(title, ...boxes) {
  $('result-title').textContent = title;
  $('result').replaceChildren(...boxes);
}

function showRun(answer, pattern) {
  setResult(pattern.function,
    requestBox(answer.request),
    answer.answer ? answerBox(answer.answer) : h('div', { class: 'box' }, h('header', {}, 'Not sent'), h('div', { class: 'inner' }, answer.error)),
    operationsBox(answer.operations),
    eventsBox(answer.events),
    heatBox(answer.heat, true));
}

function racerColour(status) {
  return { 2: '#13804b', 4: '#c77a12', 5: '#c22f2f' }[String(status)[0]] || '#666';
}

function showRace(race) {
  const detail = h('div', {});
  const showRacer = (r) => detail.replaceChildren(
    h('div', { class: 'box' }, h('header', {}, 'Client #' + r.n, h('span', { class: 'sub' }, r.outcome))),
    requestBox(r.request),
    r.answer ? answerBox(r.answer) : h('div', {}, r.error),
    operationsBox(r.operations, 'Its DynamoDB calls'));
  const winners = race.racers.filter((r) => r.answer && r.answer.status < 300);
  setResult('race: ' + race.race,
    h('div', { class: 'box race-result', 'data-winners': race.winners, 'data-racers': race.racers.length },
      h('header', {}, '⚡ ' + race.title),
      h('div', { class: 'inner' },
        h('p', { class: 'winner-line' }, race.winners === 1 ? `One winner of ${race.racers.length}` : `${race.winners} winners of ${race.racers.length}`),
        h('p', {}, race.explanation),
        h('p', { class: 'what-happened' }, race.whatHappened),
        race.setup.length ? h('p', { class: 'sub' }, 'Set up first: ' + race.setup.join('; ')) : null,
        h('div', { class: 'tally' }, race.tally.map(([outcome, n]) => h('span', { class: 'tag', 'data-outcome': outcome }, `${n} × ${outcome}`))),
        h('div', { class: 'racers' }, race.racers.map((r) => h('button', {
          class: 'racer' + (r.answer && r.answer.status < 300 ? ' win' : ''),
          style: `background:${racerColour(r.answer ? r.answer.status : 0)}`,
          title: r.outcome, onclick: () => showRacer(r),
        }, '#' + r.n, h('small', {}, r.answer ? r.answer.status : '—')))),
        h('p', { class: 'sub' }, 'Press a client to see its request, its answer and its DynamoDB calls.'))),
    detail);
  // First a loser, whose calls carry the cancellation reasons, then the winner.
  const loser = race.racers.find((r) => r.answer && r.answer.status >= 400);
  const winner = winners[0] || race.racers[0];
  detail.replaceChildren(...[
    loser ? [
      h('div', { class: 'box' }, h('header', {}, 'A loser: client #' + loser.n, h('span', { class: 'sub' }, loser.outcome))),
      operationsBox(loser.operations, 'Its DynamoDB calls'),
      answerBox(loser.answer)] : null,
    h('div', { class: 'box' }, h('header', {}, 'The winner: client #' + winner.n, h('span', { class: 'sub' }, winner.outcome))),
    requestBox(winner.request),
    winner.answer ? answerBox(winner.answer) : null,
    operationsBox(winner.operations, 'Its DynamoDB calls'),
    eventsBox(race.events)].flat().filter(Boolean));
}

function showMarkOverdue(answer) {
  const report = answer.report;
  const queries = answer.operations.filter((o) => o.operation === 'Query').length;
  const updates = answer.operations.filter((o) => o.operation === 'UpdateItem').length;
  setResult('mark-overdue',
    h('div', { class: 'box mark-result', 'data-moved': answer.moved.length },
      h('header', {}, 'mark-overdue with now = ', h('code', {}, answer.now)),
      h('div', { class: 'inner' },
        report.error ? h('p', { class: 'reason' }, report.error) :
          h('div', { class: 'kv' },
            h('span', {}, 'marked'), h('b', {}, report.marked),
            h('span', {}, 'skipped'), h('span', {}, report.skipped + ' (returned, renewed or marked meanwhile)'),
            h('span', {}, 'pages read'), h('span', {}, `${report.pagesRead} (one Query per open-loans shard, ${queries} in all, ${updates} UpdateItem)`),
            h('span', {}, 'capacity'), h('span', {}, fmt(report.capacityUnits) + ' units'),
            h('span', {}, 'complete'), h('span', {}, String(report.complete))),
        h('p', {}, answer.moved.length ? `Moved ${answer.moved.length} loan${answer.moved.length === 1 ? '' : 's'} from the open index to the overdue index:` : 'No loan was due before that time.'),
        answer.moved.map((m) => h('div', { class: 'moved', 'data-sk': m.sk },
          h('b', {}, m.summary),
          h('div', {},
            m.from ? h('span', { class: 'ix left' }, `${m.from.index} ${m.from.pk} · ${short(m.from.sk, 30)}`) : null, ' → ',
            m.to ? h('span', { class: ixClass(m.to.index) }, `${m.to.index} ${m.to.pk} · ${short(m.to.sk, 30)}`) : null))))),
    operationsBox(answer.operations),
    eventsBox(answer.events));
}

// ---- The table --------------------------------------------------------------------------

function attributeText(value) {
  if (typeof value === 'string') return '"' + short(value, 40) + '"';
  const readable = readableTime(value);
  return readable ? `${value} (${readable})` : short(JSON.stringify(value), 40);
}

function itemRow(item) {
  const mark = { added: '+', changed: '~', removed: '−' }[item.change] || '';
  return h('div', {
    class: 'item ' + (item.change || ''), 'data-pk': item.pk, 'data-sk': item.sk,
    'data-entity': item.entity, 'data-change': item.change || '',
  },
  h('span', { class: 'mark' }, mark),
  h('span', { class: 'sk', title: item.tableKey ? 'the index sort key; the item is ' + item.tableKey : 'sort key' }, item.sk),
  h('span', { class: 'what' },
    h('span', { class: 'entity e-' + item.entity }, item.entity),
    item.indexes.map((ix) => h('span', { class: ixClass(ix.index), title: 'index ' + ix.index + ': partition · sort key' }, `${ix.index} ${ix.pk} · ${short(ix.sk, 34)}`)),
    item.leftIndexes.map((ix) => h('span', { class: 'ix left', title: 'left ' + ix.index }, `${ix.index} ${ix.pk}`))),
  h('span', { class: 'attrs' }, Object.entries(item.attributes).map(([name, value]) =>
    h('span', { class: 'a' + (item.changed.includes(name) ? ' hot' : ''), title: typeof value === 'string' ? value : JSON.stringify(value) },
      h('b', {}, name), ' ', attributeText(value)))));
}

// Whether an item holds the search text (its keys, entity or any attribute).
function matches(item, text) {
  if (!text) return true;
  const haystack = [item.pk, item.sk, item.entity, ...item.indexes.flatMap((ix) => [ix.pk, ix.sk]),
    ...Object.entries(item.attributes).map(([n, v]) => n + ' ' + (typeof v === 'string' ? v : JSON.stringify(v)))].join(' ').toLowerCase();
  return haystack.includes(text.toLowerCase());
}

// The partitions the table view shows: the table's own, or an index's (items regrouped by that
// index's partition key, in its sort key's order; items without its keys are not in it).
function viewed() {
  const shown = ui.data.partitions.filter((p) => ui.allDomains || domainOf(p) === ui.domain);
  const search = ui.search.trim();
  if (!ui.byIndex) {
    return shown.map((p) => ({ ...p, items: p.items.filter((i) => matches(i, search)) }))
      .filter((p) => p.items.length);
  }
  const groups = new Map();
  let outside = 0;
  for (const p of shown) {
    for (const item of p.items) {
      const entry = item.indexes.find((ix) => ix.index === ui.byIndex);
      if (!entry) { outside += 1; continue; }
      if (!matches(item, search)) continue;
      if (!groups.has(entry.pk)) groups.set(entry.pk, []);
      groups.get(entry.pk).push({ ...item, sk: entry.sk, tableKey: `${item.pk} · ${item.sk}` });
    }
  }
  ui.outside = outside;
  return [...groups.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([pk, items]) => ({
    pk, touched: items.some((i) => i.change), items: items.sort((a, b) => a.sk.localeCompare(b.sk)),
  }));
}

function renderTable() {
  $('table-name').textContent = ui.data.table ? `(${ui.data.table})` : '';
  const c = ui.data.changes || {};
  const shown = viewed();
  const changed = [c.added ? `+${c.added} added` : null, c.changed ? `~${c.changed} changed` : null, c.removed ? `−${c.removed} removed` : null].filter(Boolean);
  const where = ui.byIndex ? `of index ${ui.byIndex}` : 'here';
  $('table-summary').textContent = `${plural(shown.length, 'partition')} ${where}, ${plural(c.items || 0, 'item')} in the table` +
    (ui.byIndex ? ` (${plural(ui.outside || 0, 'item')} not in the index: it is sparse)` : '') +
    (changed.length ? ' · last action: ' + changed.join(', ') : '');
  const views = [['', 'table'], ...(ui.data.indexes || []).map((i) => [i, i])];
  $('table-view').replaceChildren(...views.map(([value, label]) => h('button', {
    type: 'button', class: 'view' + (ui.byIndex === value ? ' on' : ''), 'data-view': value || 'table',
    onclick: () => { ui.byIndex = value; renderTable(); },
  }, label)));
  const cards = shown.map((p) => h('section', { class: 'partition' + (p.touched ? ' touched' : ''), 'data-pk': p.pk },
    h('header', {}, h('span', { class: 'pk', title: ui.byIndex ? ui.byIndex + ' partition key' : 'partition key' }, p.pk), h('span', { class: 'n' }, plural(p.items.length, 'item'))),
    p.items.map(itemRow)));
  $('partitions').replaceChildren(
    h('div', { class: 'legend' }, h('span', {}, h('span', { class: 'mark', style: 'color:#13804b' }, '+'), ' added'),
      h('span', {}, h('span', { class: 'mark', style: 'color:#b7630b' }, '~'), ' changed'),
      h('span', {}, h('span', { class: 'mark', style: 'color:#c22f2f' }, '−'), ' removed'),
      h('span', {}, 'partitions the last action touched come first')),
    ...(cards.length ? cards : [h('p', { class: 'empty' }, ui.search ? 'No item matches the search.' : ui.byIndex ? 'No item of this domain is in that index.' : 'No items in this domain yet. Run a creating pattern, or Seed data.')]));
}

function render() {
  renderTabs();
  renderPatterns();
  renderTable();
}

// ---- Start ------------------------------------------------------------------------------

$('all-domains').addEventListener('change', (e) => { ui.allDomains = e.target.checked; renderTable(); });
$('search').addEventListener('input', (e) => { ui.search = e.target.value; renderTable(); });
$('seed').addEventListener('click', () => busy(async () => {
  setResult('seed', h('div', { class: 'box' }, h('header', {}, 'Seeding every empty domain through the handlers…')));
  const answer = await api('seed', { person: person() });
  absorb(answer);
  const s = answer.seed;
  setResult('seed',
    h('div', { class: 'box seed-result' }, h('header', {}, 'Seeded through the real handlers'),
      h('div', { class: 'inner' },
        h('div', { class: 'kv' }, Object.entries(s.created).map(([k, v]) => [h('span', {}, k), h('b', {}, v)])),
        h('p', {}, `${plural(s.lentInThePast, 'loan was', 'loans were')} lent in the past, through the checkout route on a clock set back: due already or in the coming days (run mark-overdue to move the ones due to the overdue indexes).`),
        s.skipped.length ? h('p', { class: 'sub' }, 'Left alone, they already had data: ' + s.skipped.join(', ')) : null,
        s.partial.length ? h('p', { class: 'reason' }, 'Partly seeded by a seed that was stopped (delete the data file and seed again): ' + s.partial.join(', ')) : null,
        s.failures.length ? h('pre', { class: 'reason' }, s.failures.join('\n')) : null)));
  render();
}));
$('heat').addEventListener('click', showHeat);
$('check').addEventListener('click', () => busy(async () => {
  setResult('check the table', h('div', { class: 'box' }, h('header', {}, 'Checking every rule that spans items…')));
  const report = (await api('fsck', {})).fsck;
  const findings = report.findings;
  setResult('check the table',
    h('div', { class: 'box fsck-result' },
      h('header', {}, findings.length
        ? `${plural(findings.length, 'finding')} in ${plural(report.scanned, 'item')}`
        : `No finding in ${plural(report.scanned, 'item')}`),
      h('div', { class: 'inner' },
        findings.length
          ? [h('table', { class: 'findings' },
              h('tr', {}, h('th', {}, 'rule'), h('th', {}, 'item'), h('th', {}, 'what is wrong'), h('th', {}, 'repair')),
              findings.map((f) => h('tr', { 'data-rule': f.rule },
                h('td', {}, h('code', {}, f.rule)),
                h('td', {}, h('code', {}, `${f.pk} / ${f.sk}`)),
                h('td', {}, f.detail),
                h('td', {}, f.repairable ? 'repairable' : 'a person decides')))),
            h('p', { class: 'sub' }, 'cargo run -- fsck --repair --dry-run shows what a repair would write; --repair writes it.')]
          : h('p', {}, 'Every lock names its owner and every owner its locks; loan counts, copy statuses, loan index keys, audit histories and expiries agree.'))));
}));
$('reset').addEventListener('click', () => {
  if (!confirm('Delete every item of the local table?')) return;
  busy(async () => {
    const answer = await api('reset', {});
    absorb(answer);
    ui.data.changes = { items: 0 };
    setResult('empty table', h('div', { class: 'box' }, h('header', {}, `Deleted ${plural(answer.removed, 'item')}`)));
    render();
  });
});
window.addEventListener('hashchange', () => {
  const domain = location.hash.slice(1);
  if (domain && domain !== ui.domain) { ui.domain = domain; render(); }
});

busy(async () => {
  ui.data = await api('state');
  if (!ui.data.domains.some((d) => d.id === ui.domain)) ui.domain = 'fleet';
  render();
});
