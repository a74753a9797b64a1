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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Values;

    #[test]
    fn non_finite_results_are_never_sent() {
        let fine = Array::from_values("w", &[2], &Values::F32(vec![1.0, 2.0])).unwrap();
        let nan = Array::from_values("w", &[2], &Values::F32(vec![1.0, f32::NAN])).unwrap();
        let ok = Reply::Train {
            arrays: vec![("w".into(), fine.clone())],
            num_examples: 3,
            train_loss: 0.5,
        };
        let content = ok.into_content().unwrap();
        assert_eq!(content.len(), 2);
        let bad = Reply::Train {
            arrays: vec![("w".into(), nan)],
            num_examples: 3,
            train_loss: 0.5,
        };
        assert!(bad.into_content().unwrap_err().contains("array w"));
        let inf = Reply::Train {
            arrays: vec![("w".into(), fine)],
            num_examples: 3,
            train_loss: f64::INFINITY,
        };
        assert!(inf.into_content().unwrap_err().contains("train-loss"));
        let eval = Reply::Evaluate {
            num_examples: 3,
            eval_loss: f64::NAN,
            eval_acc: 0.5,
        };
        assert!(eval.into_content().is_err());
    }

    #[test]
    fn config_numbers_read_as_the_serverapp_writes_them() {
        use crate::proto::{config_record, ConfigRecordValue};
        let item = |k: &str, v| config_record::Item {
            key: k.into(),
            value: Some(ConfigRecordValue { value: Some(v) }),
        };
        let config = ConfigRecord {
            items: vec![
                item("lr", config_record_value::Value::Double(0.1)),
                item("local-steps", config_record_value::Value::Sint64(5)),
                item("bad", config_record_value::Value::Sint64(-1)),
                item("name", config_record_value::Value::String("x".into())),
            ],
        };
        assert_eq!(config_f64(&config, "lr"), Some(0.1));
        assert_eq!(config_u64(&config, "local-steps"), Some(5));
        assert_eq!(config_f64(&config, "local-steps"), Some(5.0));
        assert_eq!(config_u64(&config, "bad"), None);
        assert_eq!(config_f64(&config, "name"), None);
        assert_eq!(config_f64(&config, "absent"), None);
    }
}
