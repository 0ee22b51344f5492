# The porting guide's "Full Example (Training)" of the 1.8 API
# (seeds/003_Port_your_code_using_Cerebras_PyTorch_API_Experime.txt), written out with
# the guide's structure and statements. Only the guide's `...` are filled in (marked
# "fill-in"), with names the test defines (test_guide_examples.py: FILL-INS); one typo of
# the guide is fixed (marked "guide typo"). The CPU run compiles with backend="cpu".
import torch
import cerebras_pytorch.experimental as cstorch

# configure first, before the model exists
checkpoint_steps = 100
cstorch.configure(
    checkpoint_steps=checkpoint_steps,
    mgmt_address=MGMT_ADDRESS,  # fill-in
    model_dir=MODEL_DIR,  # fill-in
)

# the user's model
model: torch.nn.Module = Classifier()  # fill-in
compiled_model = cstorch.compile(model, backend="wse_ws")

loss_fn: torch.nn.Module = torch.nn.CrossEntropyLoss()  # fill-in

optimizer: cstorch.optim.Optimizer = cstorch.optim.configure_optimizer(
    optimizer_type="SGD",  # fill-in
    params=model.parameters(),
    lr=0.05, momentum=0.9,  # fill-in
)
lr_scheduler: cstorch.optim.lr_scheduler.LRScheduler = cstorch.optim.configure_lr_scheduler(
    optimizer, learning_rate=LEARNING_RATE,  # fill-in
)

grad_scaler = None
if loss_scale != 0.0:
    grad_scaler = cstorch.amp.GradScaler(loss_scale=loss_scale)  # fill-in


@cstorch.step_closure
def save_checkpoint(step):
    checkpoint_file = f"checkpoint_{step}.mdl"

    state_dict = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
    }
    if lr_scheduler:
        state_dict["lr_scheduler"] = lr_scheduler.state_dict()
    if grad_scaler:
        state_dict["grad_scaler"] = grad_scaler.state_dict()

    state_dict["global_step"] = step

    cstorch.save(state_dict, checkpoint_file)


global_step = 0

# resume from a checkpoint when one is given
if checkpoint_path is not None:
    state_dict = cstorch.load(checkpoint_path)

    model.load_state_dict(state_dict["model"])
    optimizer.load_state_dict(state_dict["optimizer"])
    if lr_scheduler:
        lr_scheduler.load_state_dict(state_dict["lr_scheduler"])
    if grad_scaler:
        grad_scaler.load_state_dict(state_dict["grad_scaler"])

    global_step = state_dict.get("global_step", 0)

dataloader = cstorch.utils.data.DataLoader(
    train_dataloader_fn,
    num_steps=1000,
    # fill-in: stop at MAX_STEPS steps in all; a resumed run continues after the
    # checkpoint's step (its global_step is that step's 0-based index)
    max_steps=MAX_STEPS - (global_step + 1 if checkpoint_path is not None else 0),
    batch_size=BATCH_SIZE,
    first_batch=global_step + 1 if checkpoint_path is not None else 0,
)


@cstorch.compile_step
def training_step(batch):
    inputs, targets = batch
    outputs = compiled_model(inputs)
    loss = loss_fn(outputs, targets)

    cstorch.amp.optimizer_step(
        loss, optimizer, grad_scaler, max_gradient_norm=1.0
    )

    return loss


@cstorch.step_closure
def post_training_step(loss: torch.Tensor):
    print("Loss: ", loss.item())


for i, batch in enumerate(dataloader):
    loss = training_step(batch)  # guide typo: the guide passes `dataloader`

    post_training_step(loss)

    # weights can be fetched only on the configured checkpoint steps
    if i % checkpoint_steps == 0:
        save_checkpoint(i)
