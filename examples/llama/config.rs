//! The decoder's sizes: the tiny configuration (the simulator's, and the default on a GPU) and
//! a Llama-3-8B-shaped one of 4 layers.

use crate::common::BoxError;

/// The sizes of a Llama-style decoder.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// `tiny` or `llama3-8b-4layer`, as `--config` names it.
    pub name: &'static str,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention: `heads` is a multiple).
    pub kv_heads: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Width of the MLP's gate and up projections.
    pub mlp: usize,
    /// Decoder blocks.
    pub layers: usize,
    /// Tokens of the vocabulary (rows of the embedding and of the LM head).
    pub vocab: usize,
    /// RMSNorm's epsilon.
    pub eps: f32,
    /// RoPE's base.
    pub rope_theta: f64,
}

/// Tokens per block of the paged KV cache.
pub const KV_BLOCK: usize = 16;

impl Config {
    /// Small enough for the CPU simulator (a head dim of 64 so that the decode attention takes
    /// its split rung there too).
    pub const TINY: Config = Config {
        name: "tiny",
        hidden: 256,
        heads: 4,
        kv_heads: 2,
        head_dim: 64,
        mlp: 512,
        layers: 2,
        vocab: 512,
        eps: 1e-5,
        rope_theta: 10000.0,
    };

    /// Llama 3 8B's layer shape, 4 layers, a vocabulary of 32000.
    pub const LLAMA3_8B_4LAYER: Config = Config {
        name: "llama3-8b-4layer",
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        mlp: 14336,
        layers: 4,
        vocab: 32000,
        eps: 1e-5,
        rope_theta: 500000.0,
    };

    /// The configuration `--config` names.
    pub fn named(name: &str) -> Result<Config, BoxError> {
        match name {
            "tiny" => Ok(Config::TINY),
            "llama3-8b-4layer" => Ok(Config::LLAMA3_8B_4LAYER),
            _ => Err(format!("--config {name}: expected tiny or llama3-8b-4layer").into()),
        }
    }

    /// Columns of the query projection.
    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Columns of the key (and the value) projection.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }
}
