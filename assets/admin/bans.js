// Bans: banning an author (a duration and a reason, asked in a dialog), lifting a ban, and the
// view listing who is banned now.

import { announce, ask, el, showError, timeText } from './dom.js';

const PAGE_SIZE = 20;
const DAY_MS = 24 * 60 * 60 * 1000;

const BAN = `mutation AdminBan($user: ID!, $until: DateTime, $reason: String) {
  banUser(userId: $user, until: $until, reason: $reason) { userId until }
}`;

const UNBAN = `mutation AdminUnban($user: ID!) { unbanUser(userId: $user) }`;

const BANS_QUERY = `query AdminBans($first: Int!, $after: String) {
  bans(first: $first, after: $after) {
    pageInfo { hasNextPage endCursor }
    nodes { userId until reason at by { name } }
  }
}`;

// Asks for how long and why, then bans `author` (`{ id, name }`); focus goes back to `back`.
// Resolves true when the ban was made.
export async function banAuthor(ctx, author, back) {
  document.getElementById('ban-what').textContent = `${author.name} (${author.id})`;
  const fields = await ask(document.getElementById('ban-dialog'), document.getElementById('ban-duration'), back);
  if (!fields) {
    return false;
  }
  const days = fields.duration === 'forever' ? null : Number(fields.duration);
  const until = days === null ? null : new Date(Date.now() + days * DAY_MS).toISOString();
  try {
    await ctx.api.run(BAN, { user: author.id, until, reason: fields.reason.trim() || null });
    const span = days === null ? 'for good' : `for ${days} ${days === 1 ? 'day' : 'days'}`;
    announce(`Banned ${author.name} ${span}`);
    return true;
  } catch (err) {
    showError(`${author.name} could not be banned`, err);
    return false;
  }
}

// Lifts the ban of `author` (`{ id, name }`); resolves true when it was lifted.
export async function unbanAuthor(ctx, author) {
  try {
    const data = await ctx.api.run(UNBAN, { user: author.id });
    announce(data.unbanUser ? `Unbanned ${author.name}` : `${author.name} was not banned`);
    return true;
  } catch (err) {
    showError(`${author.name} could not be unbanned`, err);
    return false;
  }
}

export class BansView {
  constructor(ctx) {
    this.ctx = ctx;
    this.page = null;
    this.rows = document.getElementById('bans-rows');
    this.table = document.getElementById('bans-table');
    this.empty = document.getElementById('bans-empty');
    this.more = document.getElementById('bans-more');
    this.more.addEventListener('click', () => this.load(false));
  }

  async show() {
    await this.load(true);
  }

  // Reads the first page (`fresh`) or the next one, appended.
  async load(fresh) {
    this.more.disabled = true;
    try {
      const data = await this.ctx.api.run(BANS_QUERY, { first: PAGE_SIZE, after: fresh ? null : this.page?.endCursor });
      if (fresh) {
        this.rows.replaceChildren();
      }
      for (const ban of data.bans.nodes) {
        this.rows.append(this.render(ban));
      }
      this.page = data.bans.pageInfo;
      this.more.hidden = !this.page.hasNextPage;
      this.table.hidden = this.rows.children.length === 0;
      this.empty.hidden = this.rows.children.length > 0;
    } catch (err) {
      showError('The bans could not be read', err);
    } finally {
      this.more.disabled = false;
    }
  }

  render(ban) {
    const unban = el('button', { type: 'button', text: 'Unban', 'aria-label': `Unban ${ban.userId}` });
    const row = el(
      'tr',
      {},
      el('td', { text: ban.userId }),
      el('td', { text: ban.until ? timeText(ban.until) : 'Forever' }),
      el('td', { text: ban.reason ?? '' }),
      el('td', { text: timeText(ban.at) }),
      el('td', { text: ban.by?.name ?? '' }),
      el('td', {}, unban),
    );
    unban.addEventListener('click', async () => {
      unban.disabled = true;
      if (await unbanAuthor(this.ctx, { id: ban.userId, name: ban.userId })) {
        const next = row.nextElementSibling ?? row.previousElementSibling;
        row.remove();
        (next?.querySelector('button') ?? document.getElementById('bans-title')).focus();
        this.table.hidden = this.rows.children.length === 0;
        this.empty.hidden = this.rows.children.length > 0;
      } else {
        unban.disabled = false;
      }
    });
    return row;
  }
}
