//! The decoder's weights on the host, in bf16: generated from a seed (scaled so that every
//! activation stays of order 1), written to and read from a safetensors file in the names and
//! layouts of Hugging Face's `LlamaForCausalLM` (each projection `out x in`, as `nn.Linear`
//! stores it), so that `bench/peers_llama.py` builds the same model in torch.

use std::collections::HashMap;
use std::path::Path;

use gpukern::bf16;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::common::BoxError;
use crate::config::Config;

/// One decoder block's weights.
pub struct LayerWeights {
    /// `input_layernorm`, `[hidden]`.
    pub attn_norm: Vec<bf16>,
    /// `q_proj`, `[heads * head_dim, hidden]`.
    pub wq: Vec<bf16>,
    /// `k_proj`, `[kv_heads * head_dim, hidden]`.
    pub wk: Vec<bf16>,
    /// `v_proj`, `[kv_heads * head_dim, hidden]`.
    pub wv: Vec<bf16>,
    /// `o_proj`, `[hidden, heads * head_dim]`.
    pub wo: Vec<bf16>,
    /// `post_attention_layernorm`, `[hidden]`.
    pub mlp_norm: Vec<bf16>,
    /// `gate_proj`, `[mlp, hidden]`.
    pub w_gate: Vec<bf16>,
    /// `up_proj`, `[mlp, hidden]`.
    pub w_up: Vec<bf16>,
    /// `down_proj`, `[hidden, mlp]`.
    pub w_down: Vec<bf16>,
}

/// The whole model's weights.
pub struct Weights {
    /// `embed_tokens`, `[vocab, hidden]`.
    pub embed: Vec<bf16>,
    /// The blocks.
    pub layers: Vec<LayerWeights>,
    /// The final `norm`, `[hidden]`.
    pub norm: Vec<bf16>,
    /// `lm_head`, `[vocab, hidden]`.
    pub lm_head: Vec<bf16>,
}

/// SplitMix64: a fast generator for the billion weights of the large configuration (the
/// examples' `StdRng` would take many seconds).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    fn uniform(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `len` values of standard deviation `std` (uniform in `[-std sqrt 3, std sqrt 3)`).
    fn values(&mut self, len: usize, std: f32) -> Vec<bf16> {
        let a = std * 3f32.sqrt();
        (0..len).map(|_| bf16::from_f32(a * self.uniform())).collect()
    }

    /// A norm's weight: `1 + 0.1 u`.
    fn norm(&mut self, len: usize) -> Vec<bf16> {
        (0..len)
            .map(|_| bf16::from_f32(1.0 + 0.1 * self.uniform()))
            .collect()
    }
}

impl Weights {
    /// Weights from `seed`: embeddings of standard deviation 1, each projection `out x in` of
    /// `1 / sqrt(in)` (a unit-variance input gives unit-variance outputs), the LM head of
    /// `2 / sqrt(hidden)` (logits spread enough for clear greedy choices), norms near 1.
    pub fn generate(c: &Config, seed: u64) -> Weights {
        let mut g = SplitMix(seed ^ 0x006C_6C61_6D61);
        let lin = |g: &mut SplitMix, out: usize, inp: usize| g.values(out * inp, 1.0 / (inp as f32).sqrt());
        let embed = g.values(c.vocab * c.hidden, 1.0);
        let layers = (0..c.layers)
            .map(|_| LayerWeights {
                attn_norm: g.norm(c.hidden),
                wq: lin(&mut g, c.q_dim(), c.hidden),
                wk: lin(&mut g, c.kv_dim(), c.hidden),
                wv: lin(&mut g, c.kv_dim(), c.hidden),
                wo: lin(&mut g, c.hidden, c.q_dim()),
                mlp_norm: g.norm(c.hidden),
                w_gate: lin(&mut g, c.mlp, c.hidden),
                w_up: lin(&mut g, c.mlp, c.hidden),
                w_down: lin(&mut g, c.hidden, c.mlp),
            })
            .collect();
        let norm = g.norm(c.hidden);
        let lm_head = g.values(c.vocab * c.hidden, 2.0 / (c.hidden as f32).sqrt());
        Weights {
            embed,
            layers,
            norm,
            lm_head,
        }
    }

    /// Every tensor with its torch name and shape.
    fn named(&self, c: &Config) -> Vec<(String, Vec<usize>, &[bf16])> {
        let mut out: Vec<(String, Vec<usize>, &[bf16])> = vec![
            (
                "model.embed_tokens.weight".into(),
                vec![c.vocab, c.hidden],
                &self.embed,
            ),
            ("model.norm.weight".into(), vec![c.hidden], &self.norm),
            ("lm_head.weight".into(), vec![c.vocab, c.hidden], &self.lm_head),
        ];
        for (i, l) in self.layers.iter().enumerate() {
            let p = format!("model.layers.{i}");
            let (h, q, kv, m) = (c.hidden, c.q_dim(), c.kv_dim(), c.mlp);
            out.extend([
                (format!("{p}.input_layernorm.weight"), vec![h], &l.attn_norm[..]),
                (format!("{p}.self_attn.q_proj.weight"), vec![q, h], &l.wq[..]),
                (format!("{p}.self_attn.k_proj.weight"), vec![kv, h], &l.wk[..]),
                (format!("{p}.self_attn.v_proj.weight"), vec![kv, h], &l.wv[..]),
                (format!("{p}.self_attn.o_proj.weight"), vec![h, q], &l.wo[..]),
                (
                    format!("{p}.post_attention_layernorm.weight"),
                    vec![h],
                    &l.mlp_norm[..],
                ),
                (format!("{p}.mlp.gate_proj.weight"), vec![m, h], &l.w_gate[..]),
                (format!("{p}.mlp.up_proj.weight"), vec![m, h], &l.w_up[..]),
                (format!("{p}.mlp.down_proj.weight"), vec![h, m], &l.w_down[..]),
            ]);
        }
        out
    }

    /// Writes the weights to a safetensors file, with the configuration in its metadata
    /// (`bench/peers_llama.py` reads it from there).
    pub fn write(&self, c: &Config, path: &Path) -> Result<(), BoxError> {
        let named = self.named(c);
        let bytes: Vec<Vec<u8>> = named
            .iter()
            .map(|(_, _, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect())
            .collect();
        let mut views = Vec::with_capacity(named.len());
        for ((name, shape, _), data) in named.iter().zip(&bytes) {
            views.push((name.clone(), TensorView::new(Dtype::BF16, shape.clone(), data)?));
        }
        let metadata = HashMap::from([
            ("config".to_string(), c.name.to_string()),
            ("hidden".to_string(), c.hidden.to_string()),
            ("heads".to_string(), c.heads.to_string()),
            ("kv_heads".to_string(), c.kv_heads.to_string()),
            ("head_dim".to_string(), c.head_dim.to_string()),
            ("mlp".to_string(), c.mlp.to_string()),
            ("layers".to_string(), c.layers.to_string()),
            ("vocab".to_string(), c.vocab.to_string()),
            ("eps".to_string(), c.eps.to_string()),
            ("rope_theta".to_string(), c.rope_theta.to_string()),
        ]);
        safetensors::tensor::serialize_to_file(views, Some(metadata), path)
            .map_err(|e| format!("writing {}: {e}", path.display()).into())
    }

    /// Reads the weights of configuration `c` from a safetensors file (bf16 tensors of the
    /// torch names and shapes; a tensor missing, of another type or shape is an error).
    pub fn read(c: &Config, path: &Path) -> Result<Weights, BoxError> {
        let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let file = SafeTensors::deserialize(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut w = Weights {
            embed: Vec::new(),
            layers: Vec::new(),
            norm: Vec::new(),
            lm_head: Vec::new(),
        };
        let shapes = Weights::generate_shapes(c);
        let mut tensors = HashMap::new();
        for (name, shape) in shapes {
            let t = file
                .tensor(&name)
                .map_err(|e| format!("{}: {name}: {e}", path.display()))?;
            if t.dtype() != Dtype::BF16 || t.shape() != shape.as_slice() {
                return Err(format!(
                    "{}: {name} is {:?} {:?}, expected BF16 {shape:?} (configuration {})",
                    path.display(),
                    t.dtype(),
                    t.shape(),
                    c.name
                )
                .into());
            }
            let values: Vec<bf16> = t
                .data()
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]))
                .collect();
            tensors.insert(name, values);
        }
        let mut take = |name: &str| tensors.remove(name).unwrap_or_default();
        w.embed = take("model.embed_tokens.weight");
        w.norm = take("model.norm.weight");
        w.lm_head = take("lm_head.weight");
        for i in 0..c.layers {
            let p = format!("model.layers.{i}");
            w.layers.push(LayerWeights {
                attn_norm: take(&format!("{p}.input_layernorm.weight")),
                wq: take(&format!("{p}.self_attn.q_proj.weight")),
                wk: take(&format!("{p}.self_attn.k_proj.weight")),
                wv: take(&format!("{p}.self_attn.v_proj.weight")),
                wo: take(&format!("{p}.self_attn.o_proj.weight")),
                mlp_norm: take(&format!("{p}.post_attention_layernorm.weight")),
                w_gate: take(&format!("{p}.mlp.gate_proj.weight")),
                w_up: take(&format!("{p}.mlp.up_proj.weight")),
                w_down: take(&format!("{p}.mlp.down_proj.weight")),
            });
        }
        Ok(w)
    }

    /// The names and shapes of configuration `c`'s tensors.
    fn generate_shapes(c: &Config) -> Vec<(String, Vec<usize>)> {
        let empty = Weights {
            embed: Vec::new(),
            layers: (0..c.layers)
                .map(|_| LayerWeights {
                    attn_norm: Vec::new(),
                    wq: Vec::new(),
                    wk: Vec::new(),
                    wv: Vec::new(),
                    wo: Vec::new(),
                    mlp_norm: Vec::new(),
                    w_gate: Vec::new(),
                    w_up: Vec::new(),
                    w_down: Vec::new(),
                })
                .collect(),
            norm: Vec::new(),
            lm_head: Vec::new(),
        };
        empty
            .named(c)
            .into_iter()
            .map(|(name, shape, _)| (name, shape))
            .collect()
    }
}
