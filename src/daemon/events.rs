//! The daemon's event stream: `flemma/event {name, uri?, data}` (harness.md §9) to every
//! subscriber. A slow or dead subscriber never blocks the publisher: each has a bounded queue
//! that drops its oldest events (and counts them) when full.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use flemma_protocol::event::{DaemonEvent, EngineEvent};
use serde::Serialize;
use serde::ser::SerializeMap;

/// Events a subscriber may fall behind by before the oldest are dropped.
pub const QUEUE_CAPACITY: usize = 1024;

/// One event on the hub: a document's (the engine's vocabulary, with the document's URI) or the
/// daemon's own. Serialised only here, as the params of a `flemma/event` notification
/// (`{name, uri?, data}`, what `flemmad events` prints).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Document {
        uri: String,
        event: Box<EngineEvent>,
    },
    Daemon(DaemonEvent),
}

impl Event {
    fn uri(&self) -> Option<&str> {
        match self {
            Event::Document { uri, .. } => Some(uri),
            Event::Daemon(_) => None,
        }
    }

    fn is_streamed_text(&self) -> bool {
        matches!(self, Event::Document { event, .. } if event.is_streamed_text())
    }
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (name, data) = match self {
            Event::Document { event, .. } => event.to_parts(),
            Event::Daemon(event) => event.to_parts(),
        };
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("name", name)?;
        if let Some(uri) = self.uri() {
            map.serialize_entry("uri", uri)?;
        }
        map.serialize_entry("data", &data)?;
        map.end()
    }
}

#[derive(Debug, Default)]
struct QueueState {
    events: VecDeque<Event>,
    dropped: u64,
    closed: bool,
    /// Closed and every queued event taken: the forwarder is done.
    drained: bool,
}

/// Which events a subscriber wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only the events of this document (a `file://` URI); `None`: every event.
    pub uri: Option<String>,
    /// Also the streamed reply and thinking text (`request:text`, `request:thinking`), which
    /// are left out otherwise.
    pub text: bool,
}

impl Filter {
    fn wants(&self, event: &Event) -> bool {
        (self.text || !event.is_streamed_text())
            && self
                .uri
                .as_deref()
                .is_none_or(|uri| event.uri() == Some(uri))
    }
}

/// One subscriber's queue.
#[derive(Debug, Default)]
pub struct Subscription {
    state: Mutex<QueueState>,
    ready: Condvar,
    filter: Mutex<Filter>,
}

impl Subscription {
    /// Changes which events this subscriber gets from now on.
    pub fn set_filter(&self, filter: Filter) {
        *self.filter.lock().unwrap_or_else(PoisonError::into_inner) = filter;
    }

    fn push(&self, event: Event) {
        if !self
            .filter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wants(&event)
        {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.events.len() >= QUEUE_CAPACITY {
            state.events.pop_front();
            state.dropped += 1;
        }
        state.events.push_back(event);
        self.ready.notify_one();
    }

    /// Waits for the next event; `None` once closed. The second value counts events dropped
    /// since the last call.
    pub fn next(&self) -> Option<(Event, u64)> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = self
            .ready
            .wait_while(state, |s| s.events.is_empty() && !s.closed)
            .unwrap_or_else(PoisonError::into_inner);
        let Some(event) = state.events.pop_front() else {
            state.drained = true;
            return None;
        };
        let dropped = std::mem::take(&mut state.dropped);
        Some((event, dropped))
    }

    /// Ends the subscription at once, dropping what is queued (the subscriber went away).
    pub fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        state.events.clear();
        self.ready.notify_all();
    }

    /// Ends the subscription once what is queued has been taken.
    fn finish(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        self.ready.notify_all();
    }

    fn is_drained(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drained
    }
}

/// Every subscriber.
#[derive(Debug, Default)]
pub struct EventHub {
    subscribers: Mutex<Vec<Arc<Subscription>>>,
}

impl EventHub {
    #[cfg(test)]
    pub fn subscribe(&self) -> Arc<Subscription> {
        self.subscribe_with(Filter::default())
    }

    pub fn subscribe_with(&self, filter: Filter) -> Arc<Subscription> {
        let subscription = Arc::new(Subscription {
            filter: Mutex::new(filter),
            ..Subscription::default()
        });
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&subscription));
        subscription
    }

    pub fn unsubscribe(&self, subscription: &Arc<Subscription>) {
        subscription.close();
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|s| !Arc::ptr_eq(s, subscription));
    }

    pub fn subscriber_count(&self) -> usize {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// At shutdown: lets every subscriber take what is queued, waiting up to `timeout`.
    pub fn drain(&self, timeout: std::time::Duration) {
        let subscribers = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for subscriber in &subscribers {
            subscriber.finish();
        }
        let start = std::time::Instant::now();
        while start.elapsed() < timeout && !subscribers.iter().all(|s| s.is_drained()) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    pub fn publish(&self, event: Event) {
        for subscriber in self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            subscriber.push(event.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_protocol::event as ev;

    fn dropped(count: u64) -> Event {
        Event::Daemon(DaemonEvent::EventsDropped(ev::EventsDropped { count }))
    }

    fn data(event: &Event) -> serde_json::Value {
        serde_json::to_value(event).expect("serialises")["data"].clone()
    }

    #[test]
    fn a_full_queue_drops_its_oldest_events_and_counts_them() {
        let hub = EventHub::default();
        let subscription = hub.subscribe();
        for n in 0..QUEUE_CAPACITY + 3 {
            hub.publish(dropped(n as u64));
        }
        let (first, lost) = subscription.next().expect("an event");
        assert_eq!(data(&first), serde_json::json!({"count": 3}));
        assert_eq!(lost, 3);
        let (second, lost) = subscription.next().expect("an event");
        assert_eq!(data(&second), serde_json::json!({"count": 4}));
        assert_eq!(lost, 0);
    }

    #[test]
    fn a_drained_queue_hands_out_what_it_holds_then_ends() {
        let hub = EventHub::default();
        let subscription = hub.subscribe();
        hub.publish(dropped(7));
        let taker = {
            let subscription = Arc::clone(&subscription);
            std::thread::spawn(move || {
                let mut events = Vec::new();
                while let Some((event, _)) = subscription.next() {
                    events.push(event);
                }
                events
            })
        };
        hub.drain(std::time::Duration::from_secs(5));
        assert!(subscription.is_drained());
        assert_eq!(taker.join().expect("the taker"), [dropped(7)]);
    }

    #[test]
    fn a_filtered_queue_gets_only_its_documents_events_and_text_when_asked() {
        let hub = EventHub::default();
        let all = hub.subscribe();
        let one = hub.subscribe();
        one.set_filter(Filter {
            uri: Some("file:///a.chat".into()),
            text: true,
        });
        let event = |event, uri: &str| Event::Document {
            uri: uri.into(),
            event: Box::new(event),
        };
        let executing = ev::EngineEvent::ToolExecuting(ev::ToolRef {
            tool_id: "t1".into(),
            tool_name: "bash".into(),
            input: None,
        });
        let text = ev::EngineEvent::RequestText(ev::StreamedText { text: "hi".into() });
        let stopped = ev::EngineEvent::EngineStopped(ev::EngineStopped {
            reason: ev::StopLabel::Idle,
            message: None,
        });
        let opened = DaemonEvent::SessionOpened(ev::SessionOpened {
            session: 1,
            peer_pid: 2,
        });
        hub.publish(event(executing.clone(), "file:///b.chat"));
        hub.publish(event(text.clone(), "file:///a.chat"));
        hub.publish(event(stopped.clone(), "file:///a.chat"));
        hub.publish(Event::Daemon(opened.clone()));
        hub.drain(std::time::Duration::ZERO);
        let taken =
            |s: &Subscription| std::iter::from_fn(|| s.next().map(|(e, _)| e)).collect::<Vec<_>>();
        assert_eq!(
            taken(&one),
            [
                event(text, "file:///a.chat"),
                event(stopped.clone(), "file:///a.chat")
            ]
        );
        assert_eq!(
            taken(&all),
            [
                event(executing, "file:///b.chat"),
                event(stopped, "file:///a.chat"),
                Event::Daemon(opened)
            ]
        );
    }

    #[test]
    fn an_unsubscribed_queue_ends_and_gets_no_more_events() {
        let hub = EventHub::default();
        let subscription = hub.subscribe();
        hub.unsubscribe(&subscription);
        hub.publish(dropped(1));
        assert!(subscription.next().is_none());
    }
}
