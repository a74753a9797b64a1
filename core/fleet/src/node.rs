//! A SuperNode's life (FLEET.md "A client's round"):
//!
//! 1. register-node (412 = already registered: fine), activate-node with a heartbeat interval;
//!    a thread sends send-node-heartbeat every third of it.
//! 2. Loop: pull-messages; for a message, pull-object each id of its tree that the previous
//!    message did not hold (retrying while not yet available, each checked against its
//!    SHA-256), confirm-message-received, call the
//!    user's function, push-messages the reply and push-object what the SuperLink asks for.
//!    With no message, get-run on the last run seen: 403 code 2007 means it has finished;
//!    then wait a second, or, after ten seconds without a message, twice as long each time
//!    up to eight.
//! 3. deactivate-node, unregister-node.
//!
//! A SuperLink restarted without its state answers the node's calls with HTTP 401 (it no
//! longer knows the key): the node joins again (1.) and goes on with the next run.

use crate::client::{unix_now, Client};
use crate::error::Error;
use crate::message::{Message, Record};
use crate::object::Object;
use crate::proto;
use crate::records::Reply;
use crate::Array;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Flower's error code for a reply whose ClientApp raised (`ErrorCode.CLIENT_APP_RAISED_EXCEPTION`).
pub const ERROR_CODE_CLIENT: i64 = 2;

/// One task the SuperLink sent: "train" or "evaluate", the arrays (state_dict names, in the
/// order sent) and the config.
pub struct Task<'a> {
    pub kind: &'a str,
    pub arrays: &'a [(String, Array)],
    pub config: &'a proto::ConfigRecord,
    pub message: &'a Message,
}

/// How the node runs.
#[derive(Clone)]
pub struct NodeOptions {
    /// Seconds between heartbeats the SuperLink expects (10-1800).
    pub heartbeat_interval: f64,
    /// Wait between pull-messages when nothing came, for the first [`NodeOptions::busy`]
    /// of waiting (the gap between a round's messages).
    pub poll: Duration,
    /// After that the wait doubles up to this (a long aggregation on the server: a
    /// hundred nodes polling every second keep a stock SuperLink busy answering them).
    pub idle_poll: Duration,
    /// How long the node polls every [`NodeOptions::poll`].
    pub busy: Duration,
    /// Set it to leave (deactivate, unregister) at the next poll, e.g. on Ctrl-C.
    pub stop: Arc<AtomicBool>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            heartbeat_interval: 30.0,
            poll: Duration::from_secs(1),
            idle_poll: Duration::from_secs(8),
            busy: Duration::from_secs(10),
            stop: Arc::default(),
        }
    }
}

/// What happened in a run.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub node_id: u64,
    pub replies: usize,
    pub error_replies: usize,
}

/// Joins the SuperLink, answers its messages with `handle` until the run ends (or
/// `options.stop` is set), then leaves. `handle`'s `Err(reason)` is sent as an error reply.
/// A SuperLink that no longer knows the node (restarted with its state in memory: HTTP 401)
/// is joined again, up to [`REJOINS`] times in a row without a reply in between.
pub fn run(
    client: &Client,
    options: &NodeOptions,
    mut handle: impl FnMut(&Task) -> Result<Reply, String>,
) -> Result<Summary, Error> {
    let mut summary = Summary::default();
    let mut rejoins = 0;
    loop {
        let node_id = join(client, options)?;
        summary.node_id = node_id;
        let node = Some(proto::Node { node_id });
        let done = Arc::new(AtomicBool::new(false));
        let heartbeat = spawn_heartbeat(client.clone(), node_id, options.heartbeat_interval, done.clone());
        let replies = summary.replies;
        let result = serve(client, options, node, &mut summary, &mut handle);
        done.store(true, Ordering::SeqCst);
        let _ = heartbeat.join();
        if summary.replies > replies {
            rejoins = 0;
        }
        match result {
            Err(e) if forgotten(&e) && rejoins < REJOINS => {
                rejoins += 1;
                eprintln!("fleet: the SuperLink no longer knows node {node_id} ({e}); joining again");
            }
            result => {
                let left = leave(client, node_id);
                result?;
                left?;
                return Ok(summary);
            }
        }
    }
}

/// Re-joins in a row, without a reply in between, before [`run`] gives up.
pub const REJOINS: usize = 5;

/// Whether the SuperLink refused the node's key: it has forgotten the node.
fn forgotten(e: &Error) -> bool {
    matches!(e, Error::Status { status: 401, .. })
}

/// register-node and activate-node: the node's id. register-node's 412 is fine: the key is
/// registered already, or SuperNode authentication is on and `flwr supernode register`
/// registered it.
fn join(client: &Client, options: &NodeOptions) -> Result<u64, Error> {
    let public_key = client.identity().public_pem().as_bytes().to_vec();
    let register = proto::RegisterNodeFleetRequest {
        public_key: public_key.clone(),
    };
    match client.call::<_, proto::RegisterNodeFleetResponse>("register-node", &register) {
        Ok(_) | Err(Error::Status { status: 412, .. }) => {}
        Err(e) => return Err(e),
    }
    let activate = proto::ActivateNodeRequest {
        public_key,
        heartbeat_interval: options.heartbeat_interval,
    };
    Ok(client
        .call::<_, proto::ActivateNodeResponse>("activate-node", &activate)?
        .node_id)
}

/// deactivate-node, unregister-node (412: SuperNode authentication is on, so nodes are
/// registered and unregistered with `flwr supernode`, not by themselves: fine).
fn leave(client: &Client, node_id: u64) -> Result<(), Error> {
    client.call::<_, proto::DeactivateNodeResponse>(
        "deactivate-node",
        &proto::DeactivateNodeRequest { node_id },
    )?;
    let unregister = proto::UnregisterNodeFleetRequest { node_id };
    match client.call::<_, proto::UnregisterNodeFleetResponse>("unregister-node", &unregister) {
        Ok(_) | Err(Error::Status { status: 412, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn spawn_heartbeat(
    client: Client,
    node_id: u64,
    interval: f64,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let every = Duration::from_secs_f64((interval / 3.0).max(1.0));
        let mut last = Instant::now();
        while !done.load(Ordering::SeqCst) {
            if last.elapsed() >= every {
                let request = proto::SendNodeHeartbeatRequest {
                    node: Some(proto::Node { node_id }),
                    heartbeat_interval: interval,
                };
                if let Err(e) =
                    client.call::<_, proto::SendNodeHeartbeatResponse>("send-node-heartbeat", &request)
                {
                    eprintln!("fleet: {e}");
                }
                last = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })
}

fn serve(
    client: &Client,
    options: &NodeOptions,
    node: Option<proto::Node>,
    summary: &mut Summary,
    handle: &mut impl FnMut(&Task) -> Result<Reply, String>,
) -> Result<(), Error> {
    let mut last_run = None;
    // The previous message's objects by id: a round's evaluate message and the next
    // round's train message carry the same global arrays, and frozen arrays stay the same
    // over rounds, so most of a message need not be pulled again.
    let mut cache = HashMap::new();
    let (mut idle, mut wait) = (Duration::ZERO, options.poll);
    while !options.stop.load(Ordering::SeqCst) {
        let pulled: proto::PullMessagesResponse = client.call(
            "pull-messages",
            &proto::PullMessagesRequest {
                node,
                message_ids: vec![],
            },
        )?;
        let (Some(header), Some(tree)) = (pulled.messages_list.first(), pulled.message_object_trees.first())
        else {
            if let Some(run_id) = last_run {
                let request = proto::GetRunRequest { node, run_id };
                match client.call::<_, proto::GetRunResponse>("get-run", &request) {
                    Err(Error::RunFinished) => return Ok(()),
                    Err(e) => return Err(e),
                    Ok(_) => {}
                }
            }
            std::thread::sleep(wait);
            idle += wait;
            if idle >= options.busy {
                wait = (wait * 2).min(options.idle_poll.max(options.poll));
            }
            continue;
        };
        (idle, wait) = (Duration::ZERO, options.poll);
        let run_id = header.metadata.as_ref().map(|m| m.run_id).unwrap_or(0);
        last_run = Some(run_id);
        let message = pull_message(client, node, run_id, tree, &mut cache)?;
        client.call::<_, proto::ConfirmMessageReceivedResponse>(
            "confirm-message-received",
            &proto::ConfirmMessageReceivedRequest {
                node,
                run_id,
                message_object_id: tree.object_id.clone(),
            },
        )?;
        let content = answer(&message, handle);
        if content.is_err() {
            summary.error_replies += 1;
        }
        let node_id = node.as_ref().map(|n| n.node_id).unwrap_or(0);
        push_reply(client, node, reply_to(&message, node_id, content))?;
        summary.replies += 1;
    }
    Ok(())
}

fn answer(
    message: &Message,
    handle: &mut impl FnMut(&Task) -> Result<Reply, String>,
) -> Result<Vec<(String, Record)>, String> {
    let kind = message.metadata.message_type.as_str();
    if kind != "train" && kind != "evaluate" {
        return Err(format!("message type {kind:?} is not train or evaluate"));
    }
    let Some(Record::Arrays(arrays)) = message.record("arrays") else {
        return Err("the message has no ArrayRecord \"arrays\"".into());
    };
    let empty = proto::ConfigRecord::default();
    let config = match message.record("config") {
        Some(Record::Config(c)) => c,
        _ => &empty,
    };
    handle(&Task {
        kind,
        arrays,
        config,
        message,
    })?
    .into_content()
}

/// The message of `tree`, its objects taken from `cache` where there (content-addressed:
/// an id names one content) and pulled otherwise; `cache` then holds this message's objects.
fn pull_message(
    client: &Client,
    node: Option<proto::Node>,
    run_id: u64,
    tree: &proto::ObjectTree,
    cache: &mut HashMap<String, Object>,
) -> Result<Message, Error> {
    let mut ids = Vec::new();
    collect(tree, &mut ids);
    let mut objects = HashMap::new();
    for id in ids {
        if objects.contains_key(&id) {
            continue;
        }
        if let Some(object) = cache.remove(&id) {
            objects.insert(id, object);
            continue;
        }
        let request = proto::PullObjectRequest {
            node,
            run_id,
            object_id: id.clone(),
        };
        let start = Instant::now();
        let bytes = loop {
            let r: proto::PullObjectResponse = client.call("pull-object", &request)?;
            if !r.object_found {
                return Err(Error::MissingObject(id));
            }
            if r.object_available {
                break r.object_content;
            }
            if start.elapsed() > Duration::from_secs(120) {
                return Err(Error::MissingObject(id));
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        objects.insert(id.clone(), Object::parse(&id, &bytes)?);
    }
    let message = Message::inflate(&tree.object_id, &objects);
    *cache = objects;
    message
}

fn collect(tree: &proto::ObjectTree, ids: &mut Vec<String>) {
    for child in &tree.children {
        collect(child, ids);
    }
    ids.push(tree.object_id.clone());
}

/// The reply to `message`: content, or an error naming the problem (and no content).
fn reply_to(message: &Message, node_id: u64, content: Result<Vec<(String, Record)>, String>) -> Message {
    let m = &message.metadata;
    let now = unix_now();
    // The reply must expire no later than the message it answers, or the SuperLink drops it.
    let ttl = (m.created_at + m.ttl - now - 1.0).max(1.0);
    let metadata = proto::Metadata {
        run_id: m.run_id,
        message_id: String::new(),
        src_node_id: node_id,
        dst_node_id: m.src_node_id,
        reply_to_message_id: m.message_id.clone(),
        group_id: m.group_id.clone(),
        ttl,
        message_type: m.message_type.clone(),
        created_at: now,
        src_task_id: None,
        dst_task_id: m.src_task_id,
    };
    match content {
        Ok(content) => Message {
            metadata,
            content: Some(content),
            error: None,
        },
        Err(reason) => {
            eprintln!("fleet: error reply: {reason}");
            Message {
                metadata,
                content: None,
                error: Some(proto::Error {
                    code: ERROR_CODE_CLIENT,
                    reason,
                }),
            }
        }
    }
}

fn push_reply(client: &Client, node: Option<proto::Node>, mut reply: Message) -> Result<(), Error> {
    let deflated = reply.deflate();
    reply.metadata.message_id = deflated.id.clone();
    // The message travels with an empty RecordDict as content (Flower's
    // remove_content_from_message); its records go as objects.
    let header = proto::Message {
        metadata: Some(reply.metadata.clone()),
        content: reply.error.is_none().then(proto::RecordDict::default),
        error: reply.error.clone(),
    };
    let pushed: proto::PushMessagesResponse = client.call(
        "push-messages",
        &proto::PushMessagesRequest {
            node,
            messages_list: vec![header],
            message_object_trees: vec![deflated.tree.clone()],
            clientapp_runtime_list: vec![],
        },
    )?;
    if pushed.objects_to_push.is_empty() {
        return Err(Error::BadContent(format!(
            "the SuperLink took none of reply {}'s objects (results {:?})",
            deflated.id, pushed.results
        )));
    }
    let bytes: HashMap<&str, &Vec<u8>> = deflated.objects.iter().map(|(i, b)| (i.as_str(), b)).collect();
    for id in &pushed.objects_to_push {
        let Some(content) = bytes.get(id.as_str()) else {
            return Err(Error::MissingObject(id.clone()));
        };
        client.call::<_, proto::PushObjectResponse>(
            "push-object",
            &proto::PushObjectRequest {
                node,
                run_id: reply.metadata.run_id,
                object_id: id.clone(),
                object_content: content.to_vec(),
                session_id: pushed.session_id.clone(),
            },
        )?;
    }
    Ok(())
}
