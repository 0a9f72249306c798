//! The master's client table: the connected clients by poll token, and the tokens to come.
//!
//! Owns [`ClientTable`]: each connection's [`Client`] under its `mio` token, and the next token
//! to hand out. Invariants: tokens start at the first client token and are never reused within
//! a master's life (a stale event or timer can never reach a newer client), also across a
//! handover (the next token travels in its record); a client is in the table from its accept
//! until the loop removes it (and tells the session policy). What each client may do is the
//! session policy's; its size is the policy's too (`SessionPolicy::client_size`), which names it
//! by [`client_id`] of its token.

use mio::Token;
use std::collections::HashMap;
use std::collections::hash_map::{Iter, IterMut, Values, ValuesMut};

use super::client::Client;
use desk_core::session::ClientId;
use desk_wire::{Frame, Role};

/// The session policy's name for the client behind a poll token (tokens are never reused).
pub(super) fn client_id(token: Token) -> ClientId {
    ClientId(token.0 as u64)
}

pub(super) fn token_of(client: ClientId) -> Token {
    Token(client.0 as usize)
}

pub(super) struct ClientTable {
    clients: HashMap<Token, Client>,
    /// The token the next accepted connection gets.
    next: usize,
}

impl ClientTable {
    /// An empty table whose first client gets `first`.
    pub(super) fn new(first: usize) -> ClientTable {
        ClientTable { clients: HashMap::new(), next: first }
    }

    /// The token the next connection gets; it is taken by [`ClientTable::insert`].
    pub(super) fn next_token(&self) -> Token {
        Token(self.next)
    }

    /// Take in a client under `token`; no later connection gets a token at or below it.
    pub(super) fn insert(&mut self, token: Token, client: Client) {
        self.next = self.next.max(token.0 + 1);
        self.clients.insert(token, client);
    }

    /// Continue a handed-over master's numbering.
    pub(super) fn continue_from(&mut self, next: usize) {
        self.next = self.next.max(next);
    }

    pub(super) fn remove(&mut self, token: &Token) -> Option<Client> {
        self.clients.remove(token)
    }

    pub(super) fn get(&self, token: &Token) -> Option<&Client> {
        self.clients.get(token)
    }

    pub(super) fn get_mut(&mut self, token: &Token) -> Option<&mut Client> {
        self.clients.get_mut(token)
    }

    pub(super) fn contains_key(&self, token: &Token) -> bool {
        self.clients.contains_key(token)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.clients.len()
    }

    pub(super) fn iter(&self) -> Iter<'_, Token, Client> {
        self.clients.iter()
    }

    pub(super) fn values(&self) -> Values<'_, Token, Client> {
        self.clients.values()
    }

    pub(super) fn values_mut(&mut self) -> ValuesMut<'_, Token, Client> {
        self.clients.values_mut()
    }

    pub(super) fn iter_mut(&mut self) -> IterMut<'_, Token, Client> {
        self.clients.iter_mut()
    }

    /// Queue a control frame (a reply, an error) for the client, if it is still connected.
    pub(super) fn reply(&mut self, token: Token, frame: &Frame) {
        if let Some(client) = self.clients.get_mut(&token) {
            client.push_control(frame);
        }
    }

    /// Connected clients of `role` (for the session's info: how many are attached).
    pub(super) fn count(&self, role: Role) -> u32 {
        let n = self.clients.values().filter(|c| c.role == Some(role) && c.alive()).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Whether a controller is attached (someone may be typing into the session).
    pub(super) fn controller_attached(&self) -> bool {
        self.clients.values().any(|c| c.role == Some(Role::Controller) && c.alive())
    }

    /// Give back the capacity of empty queues and decode buffers (the session went idle,
    /// `super::memory`).
    pub(super) fn release_idle_memory(&mut self) {
        for client in self.clients.values_mut() {
            if client.decoder.buffered() == 0 {
                client.decoder = desk_wire::FrameDecoder::new();
            }
            client.out.release_if_empty();
        }
    }

    /// Every client still connected has read all that was queued for it.
    pub(super) fn drained(&self) -> bool {
        self.clients.values().all(|c| c.out.is_empty() || !c.alive())
    }
}

impl std::ops::Index<&Token> for ClientTable {
    type Output = Client;

    fn index(&self, token: &Token) -> &Client {
        &self.clients[token]
    }
}

impl<'a> IntoIterator for &'a mut ClientTable {
    type Item = (&'a Token, &'a mut Client);
    type IntoIter = IterMut<'a, Token, Client>;

    fn into_iter(self) -> Self::IntoIter {
        self.clients.iter_mut()
    }
}
