# The porting guide's "Full Example (Evaluation)" of the 1.8 API
# (seeds/003_Port_your_code_using_Cerebras_PyTorch_API_Experime.txt), written out with
# the guide's structure and statements. Only the guide's `...` are filled in (marked
# "fill-in"), with names the test defines (test_guide_examples.py: FILL-INS); two typos
# of the guide that stop Python are fixed (marked "guide typo"). The CPU run compiles
# with backend="cpu".
import torch
import cerebras_pytorch.experimental as cstorch
import cerebras_pytorch.experimental.metrics as metrics


cstorch.configure(mgmt_address=MGMT_ADDRESS)  # fill-in

model: torch.nn.Module = Classifier()  # fill-in
compiled_model = cstorch.compile(model, backend="wse_ws")
compiled_model.eval()

loss_fn: torch.nn.Module = torch.nn.CrossEntropyLoss()  # fill-in

accuracy = metrics.AccuracyMetric("accuracy", compute_on_system=True)

state_dict = cstorch.load(EVAL_CHECKPOINT)  # fill-in
model.load_state_dict(state_dict["model"])

dataloader = cstorch.utils.data.DataLoader(
    eval_dataloader_fn,
    num_steps=100,
    batch_size=BATCH_SIZE,  # fill-in
)


@cstorch.compile_step
def evaluation_step(batch):
    inputs, targets = batch
    outputs = compiled_model(inputs)
    loss = loss_fn(outputs, targets)

    accuracy(
        labels=targets.clone(),
        predictions=outputs.argmax(-1).int(),
    )

    return loss


total_loss = 0
total_steps = 0


@cstorch.step_closure
def post_eval_step(loss: torch.Tensor):
    global total_loss
    global total_steps  # guide typo: without it `total_steps += 1` is an UnboundLocalError

    total_loss += loss.item()
    total_steps += 1


with torch.no_grad():
    for batch in dataloader:
        loss = evaluation_step(batch)

        post_eval_step(loss)

print(f"Eval Accuracy: {float(accuracy)}")  # guide typo: one closing parenthesis too many
