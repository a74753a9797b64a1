//! Reading a task's records and building replies: the shapes a stock FedAvg ServerApp sends
//! and reads (config values as `double`/`sint64`, metrics `num-examples`, `train-loss`,
//! `eval-loss`, `eval-acc`).

use crate::array::Array;
use crate::message::Record;
use crate::proto::{config_record_value, metric_record, metric_record_value, ConfigRecord};
use crate::proto::{MetricRecord, MetricRecordValue};

/// A config value as f64 (a `double`, or an integer as the ServerApp may write `lr = 1`).
pub fn config_f64(config: &ConfigRecord, key: &str) -> Option<f64> {
    match config
        .items
        .iter()
        .find(|i| i.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?
    {
        config_record_value::Value::Double(x) => Some(*x),
        config_record_value::Value::Sint64(x) => Some(*x as f64),
        config_record_value::Value::Uint64(x) => Some(*x as f64),
        _ => None,
    }
}

/// A config value as a non-negative integer (an integral `double` is accepted too).
pub fn config_u64(config: &ConfigRecord, key: &str) -> Option<u64> {
    match config
        .items
        .iter()
        .find(|i| i.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?
    {
        config_record_value::Value::Sint64(x) => u64::try_from(*x).ok(),
        config_record_value::Value::Uint64(x) => Some(*x),
        config_record_value::Value::Double(x) if x.fract() == 0.0 && *x >= 0.0 && *x < 9.0e15 => {
            Some(*x as u64)
        }
        _ => None,
    }
}

/// A MetricRecord from `(name, value)` pairs; `num-examples` is sent as `sint64`.
pub fn metrics(pairs: &[(&str, f64)]) -> MetricRecord {
    let items = pairs
        .iter()
        .map(|&(key, value)| {
            let value = if key == "num-examples" {
                metric_record_value::Value::Sint64(value as i64)
            } else {
                metric_record_value::Value::Double(value)
            };
            metric_record::Item {
                key: key.to_string(),
                value: Some(MetricRecordValue { value: Some(value) }),
            }
        })
        .collect();
    MetricRecord { items }
}

/// What a training function returns for one task.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Every array received, updated; `num-examples`; the mean loss of the local steps.
    Train {
        arrays: Vec<(String, Array)>,
        num_examples: u64,
        train_loss: f64,
    },
    /// `num-examples`, mean loss and accuracy (a fraction) on the evaluation data.
    Evaluate {
        num_examples: u64,
        eval_loss: f64,
        eval_acc: f64,
    },
}

impl Reply {
    /// The reply's RecordDict, or why it must not be sent (a non-finite value, named).
    pub fn into_content(self) -> Result<Vec<(String, Record)>, String> {
        match self {
            Reply::Train {
                arrays,
                num_examples,
                train_loss,
            } => {
                if !train_loss.is_finite() {
                    return Err(format!("train-loss is {train_loss}; nothing sent"));
                }
                for (name, array) in &arrays {
                    let values = array.values(name).map_err(|e| e.to_string())?;
                    if !values.all_finite() {
                        return Err(format!("array {name} has a non-finite value; nothing sent"));
                    }
                }
                let m = metrics(&[("num-examples", num_examples as f64), ("train-loss", train_loss)]);
                Ok(vec![
                    ("arrays".into(), Record::Arrays(arrays)),
                    ("metrics".into(), Record::Metrics(m)),
                ])
            }
            Reply::Evaluate {
                num_examples,
                eval_loss,
                eval_acc,
            } => {
                if !eval_loss.is_finite() || !eval_acc.is_finite() {
                    return Err(format!(
                        "eval-loss {eval_loss}, eval-acc {eval_acc}; nothing sent"
                    ));
                }
                let m = metrics(&[
                    ("num-examples", num_examples as f64),
                    ("eval-loss", eval_loss),
                    ("eval-acc", eval_acc),
                ]);
                Ok(vec![("metrics".into(), Record::Metrics(m))])
            }
        }
    }
}
